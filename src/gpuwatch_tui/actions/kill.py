"""Kill a whole job: SIGTERM (launcher first), a grace period, SIGKILL for survivors, a report per process.

The host side decides what the job is (`JobTree.targets`); the probe's `kill_tree` op pins each target
by pidfd + start time and never signals anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .job_tree import JobTree, KillTarget
from .report import ActionResult, RequestFailure
from .request import Request, failure_of

# Per-process outcomes, as the probe reports them.
EXITED = "exited"  # went after SIGTERM
KILLED = "killed"  # needed SIGKILL
SURVIVED = "survived"  # still there after SIGKILL
GONE = "gone"  # had already exited: nothing sent
REUSED = "reused"  # its pid belongs to another process now: refused, nothing sent
DENIED = "permission-denied"
DEAD_OUTCOMES = frozenset({EXITED, KILLED, GONE})


@dataclass(frozen=True)
class ProcessOutcome:
    pid: int
    start_ticks: int
    role: str
    name: str
    outcome: str
    message: str = ""
    term_at_s: float | None = None  # seconds after the op began
    kill_at_s: float | None = None
    ended_at_s: float | None = None
    continued: bool = False  # it was stopped (state T): SIGCONT followed the SIGTERM

    @property
    def signalled(self) -> bool:
        return self.term_at_s is not None or self.kill_at_s is not None


@dataclass(frozen=True)
class KillReport(ActionResult):
    host: str
    job: str
    command: str  # what was asked, in words, exactly as shown before confirming
    grace_s: float
    targets: tuple[KillTarget, ...]
    outcomes: tuple[ProcessOutcome, ...] = ()
    skipped: tuple[int, ...] = ()  # pids of the job without a known start time: not signalled
    elapsed_s: float | None = None
    failure: RequestFailure | None = None
    action: str = field(default="kill")

    @property
    def ok(self) -> bool:
        """Every target is gone: nothing of the job runs any more (as far as it was targeted)."""
        return self.failure is None and bool(self.outcomes) and all(o.outcome in DEAD_OUTCOMES for o in self.outcomes)

    def by_outcome(self, outcome: str) -> list[ProcessOutcome]:
        return [o for o in self.outcomes if o.outcome == outcome]

    def summary(self) -> str:
        if self.failure is not None:
            verb = "may or may not have run" if self.failure.outcome_unknown else "failed"
            return f"{self.action} {self.job} on {self.host} {verb}: {self.failure.message}"
        counts: dict[str, int] = {}
        for o in self.outcomes:
            counts[o.outcome] = counts.get(o.outcome, 0) + 1
        parts = ", ".join(f"{n} {k}" for k, n in counts.items())
        return f"{self.action} {self.job} on {self.host}: {parts}"

    def left_behind(self) -> list[ProcessOutcome]:
        """Processes still there when the op gave up: signalled and alive, or not signalable."""
        return [o for o in self.outcomes if o.outcome not in DEAD_OUTCOMES and o.outcome != REUSED]


def describe_kill(tree: JobTree, targets: list[KillTarget], grace_s: float) -> str:
    """The exact command, in words, for the confirm dialog and the audit log."""
    lines = [f"on {tree.host}: SIGTERM, launcher first, then wait up to {grace_s:g} s and SIGKILL what is left:"]
    lines += [f"  {t.role:<10} {t.describe()}" for t in targets]
    return "\n".join(lines)


async def kill_job(request: Request, job_tree: JobTree, grace_s: float = 10.0, *,
                   kill_wait_s: float = 3.0, order: str = "launcher-first", action: str = "kill") -> KillReport:
    """Take the whole job down through the probe's `kill_tree` op; never raises for a refused request."""
    targets = job_tree.targets()
    command = describe_kill(job_tree, targets, grace_s)
    base = dict(host=job_tree.host, job=job_tree.job, command=command, grace_s=grace_s, targets=tuple(targets),
                skipped=tuple(job_tree.skipped()), action=action)
    if not targets:
        return KillReport(**base, failure=RequestFailure("no-targets", "no process of this job has a known start "
                                                                       "time: nothing can be signalled safely"))
    args = {"targets": [{"pid": t.pid, "start_ticks": t.start_ticks, "role": t.role} for t in targets],
            "grace_s": grace_s, "kill_wait_s": kill_wait_s, "order": order}
    # The op itself may take grace + stagger + kill wait; the reply then needs a moment to come back.
    timeout = grace_s + kill_wait_s + 2.0 + 15.0
    try:
        reply = await request("kill_tree", args, timeout)
    except Exception as exc:
        failure = failure_of(exc)
        if failure is None:
            raise
        return KillReport(**base, failure=failure)
    by_ref = {(t.pid, t.start_ticks): t for t in targets}
    outcomes = []
    for r in reply.get("results", []):
        t = by_ref.get((r["pid"], r["start_ticks"]))
        outcomes.append(ProcessOutcome(
            pid=r["pid"], start_ticks=r["start_ticks"], role=t.role if t else r.get("role", ""),
            name=t.name if t else str(r.get("name", "")), outcome=r["outcome"], message=r.get("message", ""),
            term_at_s=r.get("term_at_s"), kill_at_s=r.get("kill_at_s"), ended_at_s=r.get("ended_at_s"),
            continued=bool(r.get("continued"))))
    return KillReport(**base, outcomes=tuple(outcomes), elapsed_s=reply.get("elapsed_s"))

"""The records both action modules read: a plan (what will be done, exactly as the person confirms it)
and its outcome. The service builds and runs them; multinode.py builds one per host of a job."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .dump import DumpReport
from .job_tree import JobTree
from .kill import KillReport
from .restart import RestartPlan, RestartReport


@dataclass(frozen=True)
class PlanTarget:
    pid: int
    start_ticks: int
    user: str  # login name on the host, or "uid N", or "?" when unknown
    role: str  # launcher, main, descendant, gpu-holder
    command: str  # its command line, shell-quoted (display only)


@dataclass(frozen=True)
class ActionPlan:
    """What will be done, exactly as the person confirms it."""

    action: str  # registry name: kill, restart_unbuffered, dump_stack
    title: str
    host: str
    job_id: str
    job: str  # the name shown by `status`
    targets: tuple[PlanTarget, ...]
    command: str  # the exact command / description shown and audited
    warnings: tuple[str, ...]
    confirm: bool
    created_at: float
    # What execute() needs: the job's tree as planned, the restart plan, the dump's options.
    tree: JobTree | None = field(default=None, repr=False, compare=False)
    restart: RestartPlan | None = field(default=None, repr=False, compare=False)
    native: bool = False
    # A job over several hosts: one plan per host (actions/multinode.py), all run by execute().
    parts: tuple[ActionPlan, ...] = field(default=(), repr=False, compare=False)
    # A Slurm job's kill is scancel on the login node (slurm/cancel.py CancelPlan), not signals to pids.
    slurm_cancel: Any = field(default=None, repr=False, compare=False)
    short_id: str = ""  # the job's short id, as every table shows it beside the name

    @property
    def label(self) -> str:
        """`id name`: what tells this job from the others of the same name."""
        return f"{self.short_id} {self.job}" if self.short_id else self.job

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(t.pid for t in self.targets)

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(sorted({t.user for t in self.targets}))

    def text(self) -> str:
        """The confirm text: host, job, pids with users and roles, the exact command, warnings."""
        if self.slurm_cancel is not None:
            return f"{self.title}: job {self.label} on {self.host}\n" + self.slurm_cancel.text()
        lines = [f"{self.title}: job {self.label} on {self.host}",
                 f"as user(s): {', '.join(self.users) or '?'}", "processes:"]
        lines += [f"  {t.role:<10} {t.pid:>7}  {t.user:<10} {t.command}" for t in self.targets]
        lines += ["command:", *("  " + line for line in self.command.splitlines())]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "host": self.host, "job_id": self.job_id, "job": self.job,
                "short_id": self.short_id,
                "targets": [t.__dict__ for t in self.targets], "command": self.command,
                "warnings": list(self.warnings), "confirm": self.confirm, "created_at": self.created_at}


@dataclass(frozen=True)
class ActionOutcome:
    plan: ActionPlan
    status: str  # done, partial (some processes not reached), failed
    report: KillReport | RestartReport | DumpReport | None
    message: str = ""  # for a failure without a report
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "done"

    def summary(self) -> list[str]:
        r = self.report
        lines: list[str] = []
        if isinstance(r, KillReport):
            lines.append(r.summary())
            lines += [f"  {o.pid:>7} {o.role:<10} {o.outcome}" + (f": {o.message}" if o.message else "")
                      for o in r.outcomes]
        elif isinstance(r, RestartReport):
            lines.append(r.summary())
            if r.kill is not None:
                lines.append("  old job: " + r.kill.summary())
            if r.gpu_released is False:
                lines.append(f"  the old job's GPU memory was still held after {r.gpu_wait_s:.0f} s")
            if r.stdout:
                lines.append(f"  output: {r.stdout}")
        elif isinstance(r, DumpReport):
            ok = sum(1 for p in r.processes if p.ok)
            lines.append(f"py-spy dump of {r.label} on {r.host}: {ok}/{len(r.processes)} processes "
                         f"(py-spy from {r.pyspy_source}: {r.pyspy})")
            lines.append("  " + r.analysis.summary)
            lines += ["  " + line for line in r.findings()]  # the grouped stacks, stuck or moving, FR and RAS
            for s in r.analysis.suspects:
                lines.append(f"  suspect: {s.label}: {s.why}")
            for p in r.processes:
                if not p.ok:
                    lines.append(f"  {p.label}: {p.message}")
            if r.saved_to:
                lines.append(f"  saved to {r.saved_to}")
        if self.message:
            lines.append(self.message)
        lines += [f"warning: {w}" for w in self.warnings]
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "ok": self.ok, "plan": self.plan.to_json(),
                "report": self.report.to_json() if self.report is not None else None,
                "message": self.message, "warnings": list(self.warnings)}

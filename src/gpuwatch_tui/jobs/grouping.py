"""Grouping: which processes make up which job.

Configured jobs are found by the probe (a cmdline regex or a pid file); every other GPU process is
grouped by discovery into launcher + ranks. This keeps a job's identity across frames (pids with
their start times), starts a fresh record when a configured job runs again, holds a new job back
until its parent chain is known, and merges jobs that turn out to be one tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..model import HostSample, ProcInfo
from .discovery import (
    RESTART_WRAPPER,
    configured_groups,
    discover,
    driver_off_gpu,
    is_python,
    launcher_kind,
    log_paths,
    output_dir_from_cmdline,
)
from .job_actions import RESTART, ActionRecord
from .job_state import JobState
from .log_wiring import LogWiring
from .settings import JobSpec

# A new GPU process whose parent the probe has not reported yet (it reports only the pids it is asked
# for) is held back this many frames while its parent chain is fetched: the ranks of a torchrun job
# are then published as one job from the start, not one job per rank merged a frame later.
HOLD_NEW_FRAMES = 2
# A run that another gpuwatch's restart started is carried on as the job it replaces if the old run
# ended at most this long before the new one is seen.
ADOPT_MARKED_RESTART_S = 120.0

NewJob = Callable[..., JobState]  # (host, name, job_id, now, spec=None) -> the registered JobState


class JobGrouping:
    """Owns the grouping state; the job records themselves live in the tracker's `jobs` dict.

    `new_job` registers a fresh record; `drop(job_id)` removes one (and its log keys) without
    hiding its processes."""

    def __init__(self, jobs: dict[str, JobState], specs: dict[str, JobSpec], wiring: LogWiring,
                 new_job: NewJob, drop: Callable[[str], None],
                 on_host: Callable[[str], list[JobState]] | None = None) -> None:
        self._jobs = jobs
        self._on_host = on_host  # the tracker's per-host index (a scan of all jobs otherwise)
        self._specs = specs
        self._wiring = wiring
        self._new_job = new_job
        self._drop = drop
        self.dismissed: set[tuple[str, int, float]] = set()  # (host, root pid, root start) hidden by a person
        self._held: dict[tuple[str, int, float], int] = {}  # (host, gpu pid, start) -> frames held back
        self.holding: set[str] = set()  # hosts with a new job held back this frame
        # host -> the runs a restart started, still to be adopted by the job they restart
        self.successors: dict[str, list[Successor]] = {}

    def _on(self, host: str) -> list[JobState]:
        if self._on_host is not None:
            return self._on_host(host)
        return [j for j in self._jobs.values() if j.host == host]

    def update(self, host: str, sample: HostSample, now: float, held: set[int] = frozenset()) -> None:
        """`held`: pids left over from jobs whose top process went; none of them starts a discovered job."""
        claimed = self._update_configured(host, sample, now) | held
        claimed |= self._configured_trees(host, sample.procs)
        self._adopt_gpu_descendants(host, sample)
        self._yield_to_configured(host, sample.procs, claimed)
        self._update_discovered(host, sample, claimed, now)

    # ------------------------------------------------------------------ one process, one job
    def _configured_trees(self, host: str, procs: dict[int, ProcInfo]) -> set[int]:
        """Every process at or below a live configured job's members: none of them may start a discovered
        job, even on a frame where the probe's match list does not name them."""
        roots = {pid for j in self._on(host) if j.spec is not None and j.exit is None
                 for pid, start in j.members.items() if pid in procs and abs(procs[pid].start_time - start) < 0.5}
        return descendants_of(roots, procs)

    def _adopt_gpu_descendants(self, host: str, sample: HostSample) -> None:
        """GPU processes below a configured job's matched processes (the ranks under a matched launcher)
        are members of that job: they are its work, and no discovered job may show them."""
        procs = sample.procs
        on_gpu = {p.pid for g in sample.gpus for p in g.processes if p.pid in procs}
        for job in [j for j in self._on(host) if j.spec is not None and j.exit is None and j.members]:
            mine = {pid for pid, start in job.members.items()
                    if pid in procs and abs(procs[pid].start_time - start) < 0.5}
            for pid in sorted((descendants_of(mine, procs) - mine) & on_gpu):
                job.members[pid] = procs[pid].start_time
                job.remember_ticks(procs[pid])

    def _yield_to_configured(self, host: str, procs: dict[int, ProcInfo], claimed: set[int]) -> None:
        """A discovered job holding a process that a configured job now claims is that configured job
        (it was seen on the GPU before the probe's first match scan): configured wins, the duplicate goes."""
        for job in [j for j in self._on(host) if j.spec is None and j.exit is None]:
            if any(pid in claimed and abs(procs[pid].start_time - start) < 0.5
                   for pid, start in job.members.items() if pid in procs):
                self._drop(job.id)

    # ------------------------------------------------------------------ configured jobs
    def _update_configured(self, host: str, sample: HostSample, now: float) -> set[int]:
        """Configured jobs: every separate process tree the regex / pid file matches is one job.

        The oldest tree is `name`; further trees running at the same time are `name#2`, `name#3`...
        A tree keeps its job while it lives; a new tree takes the first job of the spec whose run
        has ended (a restart: fresh record, phase history kept) or that never ran, else a new `#n`."""
        claimed: set[int] = set()
        procs = sample.procs
        for key, spec in self._specs.items():
            if spec.host != host:
                continue
            # A zombie (exited, parent not reaping) is a run that is over, never a new one.
            live = [p for p in sample.matches.get(key, []) if p in procs and procs[p].state != "Z"]
            live += self._successors_of(host, spec, procs, live)
            trees = [t for t in configured_groups(live, procs)
                     if (host, t[0], procs[t[0]].start_time) not in self.dismissed]
            if not trees:
                continue
            slots = sorted((j for j in self._on(host) if j.spec is spec), key=lambda j: instance(j.id, key))
            taken: set[str] = set()
            fresh: list[tuple[int, list[int]]] = []
            for root, main in trees:
                claimed.update(main)
                for pid in main:
                    claimed.update(c.pid for c in procs[pid].children)
                keys = {(pid, procs[pid].start_time) for pid in main}
                if any(j.exit is not None and any(j.members.get(pid) == st for pid, st in keys) for j in slots):
                    continue  # what is left of a run already judged ended: not a new run
                job = next((j for j in slots if j.exit is None and j.id not in taken
                            and any(j.members.get(pid) == st for pid, st in keys)), None)
                if job is None:
                    fresh.append((root, main))
                    continue
                taken.add(job.id)
                self._join_configured(job, root, main, procs)
            for root, main in fresh:
                job = next((j for j in slots if j.id not in taken and (not j.members or j.exit is not None)), None)
                if job is None and any(j.exit is None and j.members and not any(p in procs for p in j.members)
                                       for j in slots if j.id not in taken):
                    # A run whose processes are all gone from this frame is ending (its end is judged below):
                    # the new run (a restart's) takes its place at the next frame, not a `#n` of its own.
                    continue
                if job is None:
                    used = {instance(j.id, key) for j in slots}
                    n = next(i for i in range(2, len(used) + 3) if i not in used)
                    job = self._new_job(host, spec.name, f"{key}#{n}", spec=spec, now=now)
                    job.name = f"{spec.name}#{n}"
                    slots.append(job)
                elif job.exit is not None:
                    # A new run of a configured job: start a fresh record, keep the phase history.
                    history, name, actions = job.history, job.name, job.actions
                    self._drop(job.id)
                    slots.remove(job)
                    job = self._new_job(host, spec.name, job.id, spec=spec, now=now)
                    job.history, job.name, job.actions = history, name, actions
                    slots.append(job)
                taken.add(job.id)
                self._join_configured(job, root, main, procs)
        pending = self.successors.get(host)
        if pending:  # a restarted configured run that joined its job is no longer awaited
            joined = {pid for j in self._on(host) if j.spec is not None and j.exit is None for pid in j.members}
            pending[:] = [s for s in pending if s.pid not in joined]
        return claimed

    def _successors_of(self, host: str, spec, procs: dict[int, ProcInfo], live: list[int]) -> list[int]:
        """The runs this gpuwatch's restarts of `spec`'s jobs started, seen here but not (yet) among the
        matches: the probe may have read the new run's command line between the wrapper's fork and its exec."""
        out = []
        for succ in self.successors.get(host, ()):
            owner = self._jobs.get(succ.job_id)
            proc = procs.get(succ.pid)
            if (owner is not None and owner.spec is spec and proc is not None and proc.state != "Z"
                    and proc.start_ticks in (0, succ.start_ticks) and succ.pid not in live):
                out.append(succ.pid)
        return out

    def _join_configured(self, job: JobState, root: int, main: list[int], procs: dict[int, ProcInfo]) -> None:
        if job.root is None:
            job.root = (root, procs[root].start_time)
            job.remember_ticks(procs[root])
        for pid in main:
            if pid not in job.members:
                job.members[pid] = procs[pid].start_time
                job.remember_ticks(procs[pid])
        self._wiring.attach(job, [procs[p] for p in main], job.spec.logs if job.spec else ())

    # ------------------------------------------------------------------ discovered jobs
    def _update_discovered(self, host: str, sample: HostSample, claimed: set[int], now: float) -> None:
        procs = sample.procs
        self.holding.discard(host)
        for key in [k for k in self._held if k[0] == host and k[1] not in procs]:
            del self._held[key]
        self._drop_drivers(host, sample)
        expected = self.successors.get(host, [])
        seeds = [*sample.candidates, *(s.pid for s in expected if s.pid in procs)]
        for group in discover(procs, sample.gpus, claimed, seeds, sample.ml_loaded):
            if (host, group.root, group.root_start) in self.dismissed:
                continue
            keys = {(pid, procs[pid].start_time) for pid in group.main}
            job = None
            for j in self._on(host):
                if j.spec is None and j.exit is None and any(
                    j.members.get(pid) == start for pid, start in keys
                ):
                    job = j
                    break
            if job is None:
                job = self._adopt_successor(host, group, procs, now) or self._adopt_marked_restart(
                    host, group, procs, now)
            if job is None and _parent_unknown(procs[group.root], procs):
                held = [(host, pid, procs[pid].start_time) for pid in group.gpu_pids or group.main]
                frames = max(self._held.get(k, 0) for k in held)
                if frames < HOLD_NEW_FRAMES:
                    for k in held:
                        self._held[k] = frames + 1
                    self.holding.add(host)
                    continue
            if job is None:
                job_id = f"{host}:{group.root}:{int(group.root_start)}"
                job = self._jobs.get(job_id) or self._new_job(host, group.name, job_id, now=now)
            # The launcher may show up a frame after its ranks: the root moves up, the id stays.
            job.root = (group.root, group.root_start)
            job.remember_ticks(procs[group.root])
            job.name = group.name
            job.launcher = group.launcher or job.launcher
            for pid, start in keys:
                if pid not in job.members:
                    job.members[pid] = start
                    job.remember_ticks(procs[pid])
            job.gpu_pids.update(group.gpu_pids)
            self._wiring.attach(job, [procs[p] for p in group.main], ())
            if job.output_dir is None:
                for pid in group.main:
                    found = output_dir_from_cmdline(procs[pid].cmdline, procs[pid].cwd)
                    if found:
                        job.output_dir = found
                        break
        self._merge(host)

    def _drop_drivers(self, host: str, sample: HostSample) -> None:
        """A discovered job whose top process turned out to drive runs (a job candidate, torch loaded, that
        started scripts of their own) is no job: its runs are jobs of their own, it is in none."""
        on_gpu = {p.pid for g in sample.gpus for p in g.processes}
        for job in [j for j in self._on(host) if j.spec is None and j.exit is None and j.root is not None]:
            top = sample.procs.get(job.root[0])
            if top is not None and abs(top.start_time - job.root[1]) < 0.5 and driver_off_gpu(top, on_gpu):
                self._drop(job.id)

    def _adopt_successor(self, host: str, group, procs: dict[int, ProcInfo], now: float) -> JobState | None:
        """The run a restart started is the restarted job: same id, name and history (the restart is in
        its actions), a fresh record for the new run (exit facts, samples, logs)."""
        pending = self.successors.get(host, [])
        chain = set(group.main) | {procs[group.root].ppid}
        for succ in pending:
            mine = (succ.pid in group.main and procs[succ.pid].start_ticks in (0, succ.start_ticks)) or (
                succ.wrapper_pid is not None and succ.wrapper_pid in chain)
            if not mine:
                continue
            pending.remove(succ)
            old = self._jobs.get(succ.job_id)
            if old is None:
                return None
            return self._carry_on(host, old, now)
        return None

    def _adopt_marked_restart(self, host: str, group, procs: dict[int, ProcInfo], now: float) -> JobState | None:
        """A run another gpuwatch restarted (`gpuwatch restart` from a shell while this one watches): its
        top process runs under the restart wrapper and writes to the log of a job that ended here moments
        ago, whose log's marker line names that job's pid. It is that job, as for our own restarts."""
        parent = procs.get(procs[group.root].ppid)
        if parent is None or parent.name != RESTART_WRAPPER:
            return None
        paths = set(log_paths([procs[p] for p in group.main]))
        for old in self._on(host):
            if old.spec is not None or old.exit is None or now - old.exit.ended_at > ADOPT_MARKED_RESTART_S:
                continue
            marker = old.interp.restart_marker if old.interp is not None else None
            if marker is None or marker.old_pid not in old.members or not paths & set(old.logs):
                continue
            record = ActionRecord(RESTART, marker.user, marker.when, old.serial)
            return self._carry_on(host, old, now, extra_action=record)
        return None

    def _carry_on(self, host: str, old: JobState, now: float, extra_action: ActionRecord | None = None) -> JobState:
        """A fresh record for a job's new run under the same id: name, history and actions kept."""
        history, name, actions, launcher = old.history, old.name, old.actions, old.launcher
        self._drop(old.id)
        job = self._new_job(host, name, old.id, now=now)
        job.history, job.actions, job.launcher = history, actions, launcher
        if extra_action is not None:
            job.actions.append(extra_action)
        return job

    def _merge(self, host: str) -> None:
        """Jobs whose root moved up may now share processes: merge each into the older one."""
        live = sorted((j for j in self._on(host) if j.spec is None and j.exit is None), key=lambda j: j.first_seen)
        for i, older in enumerate(live):
            if older.id not in self._jobs:
                continue
            for newer in live[i + 1 :]:
                if newer.id in self._jobs and any(older.members.get(p) == st for p, st in newer.members.items()):
                    for pid, start in newer.members.items():
                        if pid not in older.members:
                            older.members[pid] = start
                            if pid in newer.start_ticks:
                                older.start_ticks[pid] = newer.start_ticks[pid]
                    older.gpu_pids.update(newer.gpu_pids)
                    self._drop(newer.id)
                    if newer.root is not None:
                        self.dismissed.discard((host, *newer.root))


@dataclass(frozen=True)
class Successor:
    """A run that a restart of `job_id` started: its process (pid, start ticks) and the wrapper above it."""

    job_id: str
    pid: int
    start_ticks: int
    wrapper_pid: int | None
    expires_at: float  # local time after which it is no longer expected


def descendants_of(roots: set[int], procs: dict[int, ProcInfo]) -> set[int]:
    """`roots` and every process below them that the frame reports (by parent link or child list)."""
    below: dict[int, set[int]] = {}
    for p in procs.values():
        below.setdefault(p.ppid, set()).add(p.pid)
        below.setdefault(p.pid, set()).update(c.pid for c in p.children)
    out: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in out:
            out.add(pid)
            stack.extend(below.get(pid, ()))
    return out


def _parent_unknown(root: ProcInfo, procs: dict[int, ProcInfo]) -> bool:
    """Whether the chain above a new job's top process may go on (a launcher above the ranks) but the
    probe has not reported the parent yet (it is asked for it through `parents_to_watch`)."""
    return root.ppid > 1 and root.ppid not in procs and (is_python(root) or launcher_kind(root) is not None)


def instance(job_id: str, key: str) -> int:
    """1 for a configured job's first tree (id `cfgN`), n for `cfgN#n`."""
    if job_id == key:
        return 1
    try:
        return int(job_id.rsplit("#", 1)[1])
    except (IndexError, ValueError):
        return 1_000_000


"""Leftovers: processes of a job that outlive its main process or launcher.

While the job's top process lives, its tree is remembered by (pid, start ticks): its members and their
live descendants as the probe lists them in the latest frame. Once the top process is gone (its pid
gone, reused or a zombie) the remembered processes that survive are the job's leftovers, followed by pid
and start ticks wherever they were re-parented (init or a subreaper), with the GPU memory they hold.
A job whose top process is already orphaned when first seen (a DataLoader worker or a torchrun rank
whose parent is init) is leftovers from the start: its parent went before gpuwatch looked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import ChildProc, HostSample, ProcInfo
from ..views import LeftoverProcess, LeftoverView
from .discovery import is_python, launcher_kind
from .job_state import JobState

# Frames a remembered pid may go unreported (the probe is asked for it from the next frame on) before it
# counts as gone; a pid reported with another start time or as a zombie is gone at once.
UNREPORTED_FRAMES = 5
ROOT_GONE_FRAMES = 2  # as judging's GONE_GRACE_SAMPLES: a root missing this many frames in a row is gone
MIB = 1024 * 1024
MAX_FAMILY = 4096  # processes remembered per job: a host that forks without end cannot grow it further
WORKER_NAMES = frozenset({"pt_data_worker"})  # comm of PyTorch DataLoader workers: a rank's children
ORPHAN_ENV = "TORCHELASTIC_RUN_ID"  # set by torchrun's agent in each rank it starts


@dataclass
class FamilyWatch:
    """What the tracker remembers of one job's tree, kept on its JobState (`job.leftovers`)."""

    root: tuple[int, float] | None = None  # (pid, start time) of the top process while it lived
    family: dict[int, int] = field(default_factory=dict)  # pid -> start ticks, the root left out
    noted: dict[int, int] = field(default_factory=dict)  # pid -> start ticks an action said it left behind
    facts: dict[int, ProcInfo | ChildProc] = field(default_factory=dict)  # the latest facts of each
    root_missing: int = 0
    root_gone_at: float | None = None  # local clock
    unreported: dict[int, int] = field(default_factory=dict)  # pid -> frames missing in a row
    view: LeftoverView | None = None
    orphan_reason: str = ""  # why a job first seen orphaned is leftovers
    remembered_from: tuple = ()  # the member facts the tree was last remembered from (the same: nothing to do)

    def follow_pids(self) -> set[int]:
        """Pids the probe should report: the remembered ones, once the top process is gone."""
        return set(self.family) if self.root_gone_at is not None else set()


def orphaned(proc: ProcInfo, procs: dict[int, ProcInfo]) -> str:
    """Why `proc`, found as the top of a job, is the remains of a job whose top went ("" when it is not):
    a DataLoader worker or a torchrun rank whose parent is init or a process that is neither Python nor a
    launcher (a subreaper). A parent not reported yet says nothing."""
    if proc.ppid > 1:
        parent = procs.get(proc.ppid)
        if parent is None or is_python(parent) or launcher_kind(parent):
            return ""
    if proc.name in WORKER_NAMES:
        return f"a DataLoader worker ({proc.name}) whose rank is gone"
    if any(k == ORPHAN_ENV for k, _ in proc.dist) and not launcher_kind(proc):
        return "a torchrun rank whose agent is gone"
    return ""


def note(job: JobState, refs: list[tuple[int, int]]) -> None:
    """Processes an action left behind (a kill's survivors) belong to the job's tree from now on."""
    w = job.leftovers
    if w is None:
        w = job.leftovers = FamilyWatch()
    root_pid = w.root[0] if w.root is not None else None
    for pid, ticks in refs:
        if ticks > 0 and pid != root_pid:
            w.noted[pid] = w.family[pid] = ticks


def held_by_leftovers(jobs: list[JobState], procs: dict[int, ProcInfo]) -> set[int]:
    """Pids no discovered job may start from: remembered processes of jobs whose top process is not alive
    in this frame (an orphan that shows on a GPU is its old job's leftover, not a new job)."""
    out: set[int] = set()
    for job in jobs:
        w = job.leftovers
        if w is None or not w.family:
            continue
        if w.root_gone_at is None and w.root is not None and _alive(procs.get(w.root[0]), w.root[1]):
            continue
        out.update(pid for pid in w.family if pid not in job.members)
    return out


def follow(job: JobState, sample: HostSample, skew: float, now: float) -> bool:
    """Update the job's watch from this frame; True when the pids to ask the probe for changed."""
    w = job.leftovers
    if w is None:
        if job.root is None:
            return False
        w = job.leftovers = FamilyWatch()
    procs = sample.procs
    before = w.follow_pids()
    if w.root_gone_at is None:
        _watch_root(job, w, procs, skew, now)
    if w.root_gone_at is not None:
        _follow_survivors(w, procs)
        view = _view(w, sample)
        if view != w.view:
            w.view = view
            job.revision += 1
    return w.follow_pids() != before


def _alive(p: ProcInfo | None, start: float) -> bool:
    return p is not None and abs(p.start_time - start) < 0.5 and p.state != "Z"


def _watch_root(job: JobState, w: FamilyWatch, procs: dict[int, ProcInfo], skew: float, now: float) -> None:
    root = job.root or w.root
    if root is None:
        return
    if w.root is None:
        rp = procs.get(root[0])
        if not _alive(rp, root[1]):
            if not w.noted:
                return
            w.root = root  # it went before it was watched: what an action left behind is left over
        else:
            w.root = root
            w.orphan_reason = orphaned(rp, procs)
        if w.orphan_reason:  # already orphaned: everything of it is left over, since it was first seen
            _remember(job, w, procs, with_root=True)
            w.root_gone_at = job.first_seen or now
            return
    if w.root != root and _alive(procs.get(w.root[0]), w.root[1]) and _alive(procs.get(root[0]), root[1]):
        w.root = root  # the top moved up (a launcher seen after its ranks)
    pid, start = w.root
    if _alive(procs.get(pid), start):
        w.root_missing = 0
        _remember(job, w, procs)
        return
    w.root_missing += 1
    info = job.exit_infos.get(pid)
    p = procs.get(pid)
    reported_dead = p is not None  # reported, but reused or a zombie
    if info is None and not reported_dead and job.exit is None and w.root_missing < ROOT_GONE_FRAMES:
        return
    w.root_gone_at = min(now, info.seen_gone_at + skew) if info is not None else now
    w.family.pop(pid, None)


def _remember(job: JobState, w: FamilyWatch, procs: dict[int, ProcInfo], with_root: bool = False) -> None:
    """The tree as this frame lists it: the members alive now and every live descendant of theirs."""
    seen = tuple([procs.get(pid) for pid in job.members])
    last = w.remembered_from
    if len(seen) == len(last) and all(a is b for a, b in zip(seen, last)):
        return  # the same facts as the frame before (a steady job): the same tree
    w.remembered_from = seen
    family: dict[int, int] = {}
    facts: dict[int, ProcInfo | ChildProc] = {}
    root_pid = w.root[0] if w.root is not None else None
    for pid, start in job.members.items():
        p = procs.get(pid)
        if not _alive(p, start):
            continue
        if p.start_ticks > 0 and (with_root or pid != root_pid):
            family[pid], facts[pid] = p.start_ticks, p
        for c in p.children:
            if c.start_ticks > 0 and c.pid not in family and c.pid != root_pid and len(family) < MAX_FAMILY:
                family[c.pid], facts[c.pid] = c.start_ticks, c
    for pid, ticks in w.noted.items():
        family.setdefault(pid, ticks)
    w.family, w.facts = family, facts


def _follow_survivors(w: FamilyWatch, procs: dict[int, ProcInfo]) -> None:
    for pid, ticks in list(w.family.items()):
        p = procs.get(pid)
        if p is None:
            n = w.unreported[pid] = w.unreported.get(pid, 0) + 1
            if n >= UNREPORTED_FRAMES:
                _forget(w, pid)
            continue
        if (p.start_ticks and p.start_ticks != ticks) or p.state == "Z":
            _forget(w, pid)
            continue
        w.unreported.pop(pid, None)
        w.facts[pid] = p
        for c in p.children:  # what a leftover starts is left over too
            if c.start_ticks > 0 and c.pid not in w.family and len(w.family) < MAX_FAMILY:
                w.family[c.pid], w.facts[c.pid] = c.start_ticks, c


def _forget(w: FamilyWatch, pid: int) -> None:
    w.family.pop(pid, None)
    w.noted.pop(pid, None)
    w.facts.pop(pid, None)
    w.unreported.pop(pid, None)


def _view(w: FamilyWatch, sample: HostSample) -> LeftoverView | None:
    """The survivors the latest frame reported (a remembered pid not reported yet is not shown)."""
    on_gpu: dict[int, list[tuple[int, float]]] = {}
    for g in sample.gpus:
        for gp in g.processes:
            if gp.pid in w.family:
                on_gpu.setdefault(gp.pid, []).append((g.index, gp.mem_used_mib or 0.0))
    out = []
    for pid in sorted(w.family):
        p = w.facts.get(pid)
        if not isinstance(p, ProcInfo) or w.unreported.get(pid):
            continue
        held = on_gpu.get(pid, [])
        out.append(LeftoverProcess(pid, w.family[pid], p.name, tuple(p.cmdline), p.user, p.state,
                                   tuple(sorted({i for i, _ in held})), int(sum(m for _, m in held) * MIB)))
    if not out:
        return None
    return LeftoverView(tuple(out), w.root_gone_at, w.root[0] if w.root else None)

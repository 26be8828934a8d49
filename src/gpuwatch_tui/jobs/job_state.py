"""JobState: everything the tracker knows about one job, mutable, owned by the tracker.

Readers never see it: they get a frozen `views.JobView` (jobs/export.py).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass, field
from operator import attrgetter

from ..model import DirStat, ExitInfo, ProcInfo
from ..vocab import DEFAULT_STALL_AFTER_S
from .job_actions import ActionRecord, DumpFinding
from .cadence import Cadence
from .discovery import launcher_kind
from .interpret import LogInterpreter
from .logtail import LogBuffer
from .activity import format_history
from .observation import ExitFacts
from .phase import Verdict
from .settings import JobSpec


@dataclass
class JobState:
    id: str
    host: str
    name: str
    serial: int
    spec: JobSpec | None = None
    launcher: str | None = None
    root: tuple[int, float] | None = None
    members: dict[int, float] = field(default_factory=dict)  # main pids -> start time (host clock)
    # pid -> start time in clock ticks, for the members and the root: what a ProcessRef carries.
    start_ticks: dict[int, int] = field(default_factory=dict)
    gpu_pids: set[int] = field(default_factory=set)
    gpus: tuple[int, ...] = ()
    logs: dict[str, LogBuffer] = field(default_factory=dict)  # path -> buffer, primary first
    interp: LogInterpreter | None = None
    samples: deque = field(default_factory=deque)
    sparse_upto: float = float("-inf")  # the newest sample already thinned (judging._thin)
    # Where the last frame found the CPU rate window's first sample, the first dense sample and the
    # first not thinned yet, counted back from the newest (index_at, below)
    rate_back: int = 0
    dense_back: int = 0
    sparse_back: int = 0
    verdict: Verdict | None = None
    history: list[tuple[str, float]] = field(default_factory=list)
    exit: ExitFacts | None = None
    exit_infos: dict[int, ExitInfo] = field(default_factory=dict)
    missing: dict[int, int] = field(default_factory=dict)  # pid -> frames missing in a row
    started_at: float | None = None  # local clock
    procs: list[ProcInfo] = field(default_factory=list)  # latest facts of the main processes
    last_procs: list[ProcInfo] = field(default_factory=list)  # the last ones seen alive
    output_dir: str | None = None
    outdir: DirStat | None = None
    compile_worker_since: float | None = None
    compilers_at: float | None = None  # the newest sample that showed compiler processes
    first_seen: float = 0.0
    last_seen: float = 0.0
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    cadence: Cadence = field(default_factory=Cadence, repr=False, compare=False)  # the job's own rhythm
    actions: list[ActionRecord] = field(default_factory=list)  # what gpuwatch did to it: kept across runs
    dump_finding: DumpFinding | None = None  # the latest py-spy dump's reading
    exit_status_known: bool = False  # the wrapper's exit record was read into `exit`
    revision: int = 0  # bumped by every frame of its host: a view built since is still current
    # What the last verdict was judged from (judging.Judged): a frame that changes none of it keeps it.
    judged: object | None = field(default=None, repr=False, compare=False)
    # Parts of the exported view kept until what they are made of changes (export.py), and the
    # multi-host join's run facts kept while the revision holds (multinode.run_facts).
    view_parts: dict = field(default_factory=dict, repr=False, compare=False)
    # Its tree remembered while its top process lives, and what survives it (leftovers.FamilyWatch).
    leftovers: object | None = field(default=None, repr=False, compare=False)

    @property
    def alive(self) -> bool:
        return self.exit is None and bool(self.members)

    @property
    def pids(self) -> list[int]:
        return sorted(self.members)

    @property
    def primary_log(self) -> LogBuffer | None:
        return next(iter(self.logs.values()), None)

    def history_text(self, now: float) -> str:
        """"loading 22m00s -> compiling 4m00s -> training 3h00m"."""
        return format_history(self.history, now)

    def remember_ticks(self, proc: ProcInfo) -> None:
        """Keep the exact start of a member or root (0 means the probe did not say)."""
        if proc.start_ticks:
            self.start_ticks[proc.pid] = proc.start_ticks


def index_at(samples, t: float, back: int, after: bool = False) -> int:
    """`bisect_left(samples, t)` by time (with `after`: `bisect_right`), looked for first `back`
    samples from the newest, where the caller found it on the last frame (each frame moves these
    places by one sample at most, as the window's new sample does), and at the oldest (a young job).
    Else by bisection. (A deque indexes in steps of 64 from its nearer end: the places looked at
    first are a step from an end; the middle where a bisection starts is not.)"""
    first = samples[0].time
    if (first > t) if after else (first >= t):
        return 0
    n = len(samples)
    i = n - back
    if 0 < i < n:
        a, b = samples[i - 1].time, samples[i].time
        if (a <= t < b) if after else (a < t <= b):
            return i
    return (bisect_right if after else bisect_left)(samples, t, key=_time)


_time = attrgetter("time")  # a sample's time: the bisection key (a C call, not a Python function)


def hint_phase(job: JobState) -> str | None:
    hint = job.interp.hint if job.interp is not None else None
    return hint.phase if hint is not None else None


def quiet_limit(job: JobState) -> float:
    """How long the job's log may be quiet before its silence is judged (cadence.py): its rhythm's
    limit where it has one, else its stall_after."""
    return job.cadence.quiet_limit(hint_phase(job), job.stall_after_s)


def lead_process(procs: list[ProcInfo]) -> ProcInfo | None:
    """The process whose stdout matters: the first Python rank (not the launcher)."""
    if not procs:
        return None
    if len(procs) == 1:
        return procs[0]  # (the rank, or else the launcher: the one process either way)
    ranks = [p for p in procs if p.is_python and not launcher_kind(p)]
    return (ranks or procs)[0]

"""Plain data the core hands around: what a probe reported about GPUs and processes.

These types carry no behaviour and import nothing from the UI, so the headless verbs,
the phase engine and the dashboard all read the very same objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass

from .probe import gpu_metrics
from .quick_init import quick_init
from .quick_record import quick_record
from .vocab import GPU_SOURCES, HOST_STATES  # noqa: F401  (re-exported: defined once, in vocab)


@quick_record
@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    mem_used_mib: float | None
    # its share of the GPU's SM time, read only where the GPU has more than one process (None: not read)
    sm_pct: float | None = None


def _gpu_sample_class():
    """GpuSample: one GPU at one instant. Any measurement the driver refuses is None.

    Its fields are index, uuid, name, then one per GPU metric of probe/gpu_metrics.py (in the table's
    order, None by default: a source that lacks a metric leaves it out), then the GPU's processes and
    its workload (what a metrics source says runs there: dcgm-exporter's hpc_job or pod label; the probe
    leaves it None). Built from the table so that a new metric is one row there."""
    fields = [("index", int), ("uuid", str), ("name", str)]
    fields += [(name, "float | None", field(default=None)) for name in gpu_metrics.NAMES]
    fields += [("processes", "tuple[GpuProcess, ...]", field(default=())),
               ("workload", "str | None", field(default=None))]
    cls = make_dataclass("GpuSample", fields, frozen=True, slots=True)
    cls.__module__ = __name__  # (pickle finds the class by it)
    cls.__doc__ = "One GPU at one instant. Any measurement the driver refuses is None."
    return quick_record(cls)


GpuSample = _gpu_sample_class()


@quick_record
@dataclass(frozen=True, slots=True)
class FdTarget:
    """Where a process's stdout or stderr goes (from /proc/PID/fd/N and fdinfo)."""

    path: str
    kind: str  # file, pipe, tty, socket, null, deleted, other, unknown
    append: bool = False
    size: int | None = None  # a regular file's, where the reader took it (the restart capture); samples leave it out


@quick_init
@dataclass(frozen=True)
class ProcessRef:
    """One process for good: a pid alone may be reused, (pid, start time in clock ticks since
    boot) may not. Actions carry these, and the probe re-checks the start time before acting."""

    host: str
    pid: int
    start_ticks: int


@quick_record
@dataclass(frozen=True, slots=True)
class ChildProc:
    pid: int
    name: str  # comm
    cmdline: tuple[str, ...] = ()
    state: str = ""
    cpu_s: float = 0.0
    start_ticks: int = 0
    uid: int | None = None  # the owner, as the host reports it
    user: str | None = None  # its login name on the host (None: unknown uid)


@quick_record
@dataclass(frozen=True, slots=True)
class ProcInfo:
    """Facts about one process, read from /proc on its host.

    A process is identified by (pid, start_time): a pid alone may have been reused.
    """

    pid: int
    ppid: int
    start_time: float  # unix seconds
    name: str  # comm
    cmdline: tuple[str, ...]
    cwd: str | None
    state: str  # R, S, D, Z, T, ...
    cpu_s: float  # utime+stime of the process itself
    cpu_children_s: float  # utime+stime of live descendants + reaped children
    rss_bytes: int
    threads: int
    sid: int
    pgid: int
    children: tuple[ChildProc, ...]  # all live descendants
    stdout: FdTarget | None
    stderr: FdTarget | None
    unbuffered: bool  # -u or PYTHONUNBUFFERED in force
    unbuffered_reason: str  # "-u", "PYTHONUNBUFFERED=1", or "" when buffered/unknown
    is_python: bool
    env_readable: bool = True
    start_ticks: int = 0  # start time in clock ticks since boot (exact; start_time is rounded)
    uid: int | None = None  # the owner, as the host reports it
    user: str | None = None  # its login name on the host (None: unknown uid)
    # Compiler processes (gcc, cc1plus, ptxas...) the probe saw below this one between two samples:
    # short compiler runs that no sample would catch alive.
    compilers_seen: tuple[str, ...] = ()
    # The run/rank variables of its exec-time environment (SLURM_JOB_ID, TORCHELASTIC_RUN_ID,
    # MASTER_ADDR/PORT, RANK, LOCAL_RANK, WORLD_SIZE, ...) as sorted (name, value) pairs.
    dist: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.start_time)


@quick_init
@dataclass(frozen=True)
class ExitInfo:
    """A watched process that went away, as far as its host could tell."""

    pid: int
    start_time: float
    seen_gone_at: float
    exit_code: int | None = None  # known only when the probe started it
    signal: int | None = None


@dataclass(frozen=True)
class ActionNote:
    """A record a gpuwatch left on the host as it acted on processes there (probe/action_notes.py): read by
    every gpuwatch watching them. `when` is the host's clock; targets are (pid, start ticks)."""

    id: str
    action: str  # kill, restart_unbuffered, run_started (the run a restart started)
    user: str  # the local user who confirmed it (host-written text: hostile)
    when: float
    targets: tuple[tuple[int, int], ...]
    status_file: str | None = None  # run_started: the wrapper's exit record
    # dump_stack: what the stacks said (evidence line, and maybe the phase and detail they suggest)
    finding: tuple[str, str | None, str | None] | None = None


def parse_note(raw: dict) -> ActionNote | None:
    """A probe's note as sent, or None where it is not one (a host may write anything there)."""
    try:
        targets = tuple((int(pid), int(ticks)) for pid, ticks in raw["targets"][:64])
        status = raw.get("status_file")
        f = raw.get("finding")
        finding = None
        if isinstance(f, dict) and isinstance(f.get("evidence"), str):
            finding = (f["evidence"][:600], _word(f.get("phase")), _word(f.get("detail")))
        return ActionNote(str(raw["id"])[:32], str(raw["action"])[:32], str(raw["user"])[:64], float(raw["time"]),
                          targets, str(status)[:1024] if isinstance(status, str) else None, finding)
    except (KeyError, TypeError, ValueError):
        return None


def _word(value) -> str | None:
    return value[:32] if isinstance(value, str) and value else None


@quick_record
@dataclass(frozen=True, slots=True)
class TailChunk:
    """New bytes of a followed file since the last frame."""

    key: str
    path: str
    data: bytes
    reset: bool  # file was rotated, truncated or recreated; start over
    skipped: int  # bytes dropped because the writer outran the cap
    size: int | None
    mtime: float | None
    error: str | None
    # Over-long lines the probe shortened: (position in data where the kept part ends, bytes dropped).
    cut: tuple[tuple[int, int], ...] = ()


@quick_init
@dataclass(frozen=True)
class DirStat:
    key: str
    path: str
    exists: bool
    files: int
    total_bytes: int
    newest_mtime: float | None
    newest_name: str | None
    error: str | None = None


@dataclass
class HostSample:
    """Everything one probe frame reported."""

    time: float
    gpu_source: str
    gpus: list[GpuSample]
    procs: dict[int, ProcInfo]
    gone: list[ExitInfo] = field(default_factory=list)
    tails: list[TailChunk] = field(default_factory=list)
    dirs: list[DirStat] = field(default_factory=list)
    gpu_error: str | None = None
    cpu_count: int | None = None
    load1: float | None = None
    # What top/htop show first: busy share of all CPUs since the last sample, RAM in KiB.
    cpu_pct: float | None = None
    mem_total_kib: int | None = None
    mem_avail_kib: int | None = None
    driver: str | None = None  # the NVIDIA driver version, when a GPU source gave one
    matches: dict[str, list[int]] = field(default_factory=dict)  # configured-job key -> pids
    # False from a source that knows no processes (Prometheus): an empty `procs` then means "not known",
    # never "every process has gone", so the job engine must not read it.
    procs_known: bool = True
    # Processes that are jobs before they use a GPU: pid -> why ("torch": libraries mapped and stdout to
    # a file; "launcher": started by torchrun / accelerate / deepspeed).
    candidates: dict[int, str] = field(default_factory=dict)
    # Watched Python processes (not on a GPU) that have an ML runtime mapped (torch, JAX, TensorFlow, the
    # CUDA runtime): evidence that a parent trains rather than drives runs (jobs/boundary.py).
    ml_loaded: frozenset[int] = frozenset()
    notes: list[ActionNote] = field(default_factory=list)  # actions of a gpuwatch on these processes (once each)
    # What grouping reads of `procs` and of the GPUs' process lists (grouping_reuse.frame_key), when
    # the frame parser already knows it (it reuses the last frame's keys for unchanged processes).
    procs_key: tuple | None = field(default=None, compare=False, repr=False)
    gpus_key: tuple | None = field(default=None, compare=False, repr=False)

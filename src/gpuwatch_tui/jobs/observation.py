"""What the engine is given about one job: its resource samples, GPU readings, log, exit and output facts,
gathered into one JobObservation per judgment (the tracker builds them; the engine only reads them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..model import FdTarget
from ..quick_init import quick_init
from ..vocab import DEFAULT_STALL_AFTER_S
from .interpret import Failure, PhaseHint
from .progress import Progress

# The records made for every job on every frame (samples, readings) or judgment (facts, observation,
# decision, verdict) are slotted dataclasses, read-only by convention, not frozen: a frozen __init__ sets
# each field through object.__setattr__, ~1.5k instructions a field (a 10-field sample cost 14k, 3.4k
# slotted). They hash by value as before (unsafe_hash) where they could be hashed; nothing assigns to them.



@dataclass(slots=True, unsafe_hash=True)
class GpuReading:
    index: int
    util_pct: float | None
    mem_used_mib: float | None
    power_w: float | None
    power_limit_w: float | None
    # NVML GPM (Hopper and later; None elsewhere or not read lately): what the SMs really do
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    # A GPU other jobs hold too (gpu_share.py): how many; where the probe read each process's share, the
    # job's own processes' SM % and the whole GPU's util (util_pct is then what the job's share stands for)
    shared_with: int = 0
    gpu_util_pct: float | None = None
    own_sm_pct: float | None = None

    @property
    def power_fraction(self) -> float | None:
        if self.power_w is None or not self.power_limit_w:
            return None
        return self.power_w / self.power_limit_w


@dataclass(slots=True, unsafe_hash=True)
class ResourceSample:
    """One instant of a job's processes and GPUs."""

    time: float
    cpu_s: float | None  # CPU seconds of the main processes (launcher + ranks), own time only
    children_cpu_s: float | None = None  # of everything below them: workers, compilers
    gpus: tuple[GpuReading, ...] = ()
    states: tuple[str, ...] = ()  # of the main processes
    compilers: tuple[str, ...] = ()  # names of compiler processes alive (gcc, cc1, ptxas, ...)
    compile_workers: int = 0  # inductor compile-worker processes alive (idle or not)
    rank_cpu_s: tuple[tuple[int, float], ...] = ()  # (pid, cpu seconds) per rank
    log_bytes: int | None = None  # bytes seen in the job's log(s) so far
    # The main pids summed into cpu_s. CPU rates compare samples of the same set only: a process joining
    # the job (the launcher found a frame after its ranks) would count its whole past CPU time as now.
    members: tuple[int, ...] = ()


@dataclass(slots=True)
class LogFacts:
    """What the log says, as of now (built by the tracker from a LogInterpreter + LogBuffer)."""

    path: str | None = None
    total_bytes: int = 0
    last_growth_at: float | None = None
    hint: PhaseHint | None = None
    failure: Failure | None = None
    failures: int = 0
    finished_at: float | None = None
    progress: Progress | None = None
    last_progress_at: float | None = None
    exit_code: int | None = None  # as the log reports it (torchrun root cause)
    signal: str | None = None
    phase_progress: dict = field(default_factory=dict)
    phase_progress_phase: str | None = None
    error: str | None = None  # the probe could not read the log
    # Whether the probe has reported on the log file at all yet (the first tail read comes a frame
    # after the job is first seen). Until then nothing may be claimed about the log's silence.
    observed: bool = True
    size: int | None = None  # the file's size as the probe last reported it (0: really empty)
    mtime: float | None = None  # the file's mtime (local clock): when it was last written
    finished_text: str | None = None  # the log's own completion line (a run summary, "Training completed")
    finished_seq: int | None = None  # its line number, to order it against the failure's


@quick_init
@dataclass(frozen=True)
class ExitFacts:
    ended_at: float
    exit_code: int | None = None
    signal: int | None = None


@quick_init
@dataclass(frozen=True)
class OutputFacts:
    path: str
    newest_mtime: float | None
    newest_name: str | None
    files: int
    total_bytes: int


@dataclass(slots=True)
class JobObservation:
    samples: Sequence[ResourceSample]  # oldest first
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    started_at: float | None = None  # the earliest process start of the job
    log: LogFacts = field(default_factory=LogFacts)
    stdout: FdTarget | None = None
    stderr: FdTarget | None = None
    unbuffered: bool | None = None  # None: unknown (not Python, or environment unreadable)
    unbuffered_reason: str = ""
    is_python: bool = True
    exit: ExitFacts | None = None  # set once every main process is gone
    output: OutputFacts | None = None
    has_gpus: bool = True  # whether the job holds GPUs at all (CPU-only jobs: False)
    compile_worker_since: float | None = None  # when the inductor worker pool first appeared
    killed_by: str | None = None  # "killed by USER via gpuwatch at ...": gpuwatch ended this run itself
    # How long the log may be quiet before its silence is judged: the job's rhythm's limit (cadence.py),
    # at most stall_after; None: stall_after. And the rhythm said in numbers, for the evidence.
    quiet_limit_s: float | None = None
    rhythm_line: str | None = None



"""What a job's resources and log say, in numbers and in words: CPU and GPU rates over a window, whether
a GPU works, idles or spins (a kernel that waits), stdout buffering, and the evidence lines the verdicts carry.
Thresholds are from real H200 measurements (DESIGN.md)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Sequence

from ..vocab import MIB_PER_GIB, fmt_duration
from .progress import Progress
from .gpu_share import shared_line
from .observation import GpuReading, JobObservation, LogFacts, ResourceSample

# Thresholds, named for what they separate.
RATE_WINDOW_S = 30.0  # CPU / GPU rates: what the job does now, not a minute ago
CPU_BUSY_CORES = 0.3  # main process + children, in cores
CPU_FLAT_CORES = 0.05
GPU_BUSY_UTIL = 50.0
GPU_IDLE_UTIL = 10.0
GPU_SPIN_UTIL = 90.0
# Power as a share of the power limit: ~119 W of 700 W (17%) is a held-idle H200; 690 W is training.
GPU_WORKING_POWER_FRACTION = 0.30
# Clearly computing, not just holding a context: what overrides a start-up log line (a torchrun banner).
# An NCCL all-reduce loop on 2 H200s drew 255-280 W (36-40%); held-idle is ~17%, training ~99%.
GPU_COMPUTING_POWER_FRACTION = 0.35
# GPM: a kernel that waits (busy-wait, a collective spinning) is 100% util at ~0.8% SM active and no DRAM
# traffic on an H200; a bf16 matmul 94% SM, a copy loop 95% SM / 84% DRAM.
GPM_WAIT_SM_PCT = 5.0
GPM_WAIT_DRAM_PCT = 2.0
GPM_WORK_SM_PCT = 20.0  # SMs this busy: working, whatever the power says
# A spin GPM confirms is called stalled this soon after the log went quiet (the power signal alone keeps
# the job's own limit: a small model can compute at 100% util and low power).
GPM_SPIN_STALL_S = 55.0  # (named within the minute, with a sample's latency)
COMPILE_RECENT_S = 30.0  # compiler children seen this recently still count as compiling
MIN_SPIN_S = 15.0  # util-without-power must hold this long (within the quiet period) to be a spin
MID_RUN_S = 10.0  # a job first seen this long after its process started was found mid-run
YOUNG_S = 30.0  # a job first seen this soon after its start, log not read yet, is "starting"

COMPILE_WORKER_MARK = "torch/_inductor/compile_worker"

BUFFERED_ADVICE = "output is sitting in the process's stdout buffer: restart it with -u to see it"
UNFLUSHED_ADVICE = "stdout is block-buffered: restart it with -u to see its output as it is written"

# ----------------------------------------------------------------------------- helpers
def format_history(history: Sequence[tuple[str, float]], now: float) -> str:
    """[(phase, since), ...] -> "loading 22m00s -> compiling 4m00s -> training 3h00m"."""
    parts = []
    for i, (phase, since) in enumerate(history):
        end = history[i + 1][1] if i + 1 < len(history) else now
        parts.append(f"{phase} {fmt_duration(end - since)}")
    return " -> ".join(parts)



@dataclass(slots=True)
class Activity:
    """Rates over the recent window."""

    span_s: float = 0.0
    cpu_cores: float | None = None  # main + children
    main_cores: float | None = None
    child_cores: float | None = None
    max_rank_cores: float | None = None
    gpus: dict[int, GpuReading] = field(default_factory=dict)  # latest per GPU
    gpu_util_min: dict[int, float] = field(default_factory=dict)  # over the window
    gpu_power_frac_max: dict[int, float] = field(default_factory=dict)
    gpu_mem_delta: dict[int, float] = field(default_factory=dict)
    compilers_recent: tuple[str, ...] = ()
    compilers_now: tuple[str, ...] = ()
    compilers_last_at: float | None = None  # the last sample that showed a compiler process
    compile_workers: int = 0
    states: tuple[str, ...] = ()
    log_grew_in_window: bool = False


def _delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return max(0.0, b - a)  # processes come and go: a drop is not negative work


def _recent(samples: Sequence[ResourceSample], since: float) -> list[ResourceSample]:
    """The samples taken at or after `since`, oldest first. Samples come in time order: found by
    bisection, copied in C (a job keeps up to WINDOW_S of them; the engine reads the last seconds)."""
    i = bisect_left(samples, since, key=_sample_time)
    if i >= len(samples):
        return []
    return samples[i:] if isinstance(samples, list) else list(islice(samples, i, None))


_sample_time = attrgetter("time")


def measure_activity(samples: Sequence[ResourceSample], now: float, window: float = RATE_WINDOW_S,
              extremes: bool = True) -> Activity:
    """Rates over the window; with `extremes`, each GPU's lowest util and highest power over it (only
    the spin rule reads those, and only when a GPU could be spinning: `_context`)."""
    act = Activity()
    if not samples:
        return act
    last = samples[-1]
    n = len(samples)
    start, window_first, first = samples_window(samples, now, window)
    span = last.time - first.time
    act.span_s = span
    if span > 0:
        act.main_cores, act.child_cores, act.cpu_cores = cpu_rates(first, last, span)
        before = dict(first.rank_cpu_s)
        rates = [(cpu - before[pid]) / span for pid, cpu in last.rank_cpu_s if pid in before]
        act.max_rank_cores = max(rates) if rates else None
        if first.log_bytes is not None and last.log_bytes is not None:
            act.log_grew_in_window = last.log_bytes > first.log_bytes
    window_samples = (samples[start:] if isinstance(samples, list) else islice(samples, start, None)) \
        if start < n else (last,)
    for g in last.gpus:
        act.gpus[g.index] = g
    util_min, power_max = act.gpu_util_min, act.gpu_power_frac_max
    for s in window_samples if extremes else ():
        for g in s.gpus:
            util = g.util_pct
            if util is not None:
                kept = util_min.get(g.index)
                if kept is None or util < kept:
                    util_min[g.index] = min(100.0, util)
            pf = g.power_fraction
            if pf is not None:
                kept = power_max.get(g.index)
                if kept is None or pf > kept:
                    power_max[g.index] = max(0.0, pf)
    first_mem = {g.index: g.mem_used_mib for g in window_first.gpus}
    for g in last.gpus:
        if g.mem_used_mib is not None and first_mem.get(g.index) is not None:
            act.gpu_mem_delta[g.index] = g.mem_used_mib - first_mem[g.index]
    seen: list[str] = []
    since = now - COMPILE_RECENT_S
    # The compile window: from `start` when it is the rate window (the window's fallback sample, the
    # last one, may be older than it: each sample's time is checked).
    cstart = start if window == COMPILE_RECENT_S else bisect_left(samples, since, key=_sample_time)
    with_compilers = [s for s in islice(samples, cstart, None) if s.compilers] if cstart < n else [last]
    for s in with_compilers:  # (usually none: the scan above is the cost)
        if s.compilers and s.time >= since:
            seen.extend(s.compilers)
            act.compilers_last_at = s.time
    act.compilers_recent = tuple(dict.fromkeys(seen))
    act.compilers_now = tuple(dict.fromkeys(last.compilers))
    act.compile_workers = last.compile_workers
    act.states = last.states
    return act


def samples_window(samples: Sequence[ResourceSample], now: float, window: float) -> tuple:
    """(index of the window's first sample, that sample, the sample the rates start from) of a
    non-empty list of samples."""
    last = samples[-1]
    n = len(samples)
    # The window by bisection: the samples from index `start` on (none: the last one stands for it).
    start = bisect_left(samples, now - window, key=_sample_time)
    window_first = samples[start] if start < n else last
    first = window_first if n - start > 1 else (samples[-2] if n > 1 else last)
    if last.members and first.members != last.members:
        same = [s for s in _recent(samples, first.time) if s.members == last.members]
        first = same[0] if same else last  # just changed: no rate until a second sample of the same set
    return start, window_first, first


def cpu_rates(first: ResourceSample, last: ResourceSample, span: float) -> tuple:
    """(main, children, total) cores between two samples `span` > 0 seconds apart (None: not measured)."""
    main = _delta(first.cpu_s, last.cpu_s)
    kids = _delta(first.children_cpu_s, last.children_cpu_s)
    main_cores = None if main is None else main / span
    child_cores = None if kids is None else kids / span
    cpu_cores = None if main_cores is None else main_cores + (child_cores or 0.0)
    return main_cores, child_cores, cpu_cores


def gpu_busy_facts(act: Activity, quiet: Activity | None = None) -> tuple[bool, bool, bool, list[int]]:
    """(busy, idle, spinning, spinning GPU indices) of the job's GPUs.

    A spin is judged over the quiet period only (`quiet`): before it the GPU was really working."""
    quiet = quiet or act
    if not act.gpus:
        return False, True, False, []
    busy = idle = False
    spinning: list[int] = []
    utils = []
    for idx, g in act.gpus.items():
        util = g.util_pct
        if util is None:
            continue
        utils.append(util)
        pf = g.power_fraction
        sm = g.sm_active_pct
        if util >= GPU_BUSY_UTIL and (pf is None or pf >= GPU_WORKING_POWER_FRACTION
                                      or (sm is not None and sm >= GPM_WORK_SM_PCT)):
            busy = True
        sustained = quiet.gpu_util_min.get(idx, util) >= GPU_SPIN_UTIL and quiet.span_s >= MIN_SPIN_S
        if not sustained:
            continue
        if sm is not None:  # GPM says it: the SMs wait or work, whatever the power
            if gpm_waiting(g):
                spinning.append(idx)
            continue
        peak_pf = quiet.gpu_power_frac_max.get(idx)
        if peak_pf is not None and peak_pf < GPU_WORKING_POWER_FRACTION:
            spinning.append(idx)
    idle = bool(utils) and all(u < GPU_IDLE_UTIL for u in utils)
    if not utils:
        idle = True
    if spinning:
        busy = any(
            i not in spinning and (g.util_pct or 0) >= GPU_BUSY_UTIL
            and (g.power_fraction is None or g.power_fraction >= GPU_WORKING_POWER_FRACTION)
            for i, g in act.gpus.items()
        )
    return busy, idle, bool(spinning), spinning


def gpm_waiting(g: GpuReading) -> bool:
    """High util with the SMs idle and no DRAM traffic (GPM): a kernel waiting, not computing."""
    sm = g.sm_active_pct
    return (sm is not None and (g.util_pct or 0) >= GPU_SPIN_UTIL and sm < GPM_WAIT_SM_PCT
            and (g.dram_active_pct is None or g.dram_active_pct < GPM_WAIT_DRAM_PCT))


def gpm_spin_line(g: GpuReading) -> str:
    tensor = f", tensor {g.tensor_active_pct:.0f}%" if g.tensor_active_pct is not None else ""
    dram = f", DRAM {g.dram_active_pct:.0f}%" if g.dram_active_pct is not None else ""
    power = f", {g.power_w:.0f} W" if g.power_w is not None else ""
    return (f"GPU{g.index}: {g.util_pct:.0f}% util but SM active {g.sm_active_pct:.2g}%{tensor}{dram}{power}: "
            "a kernel waiting, not computing (GPM)")


def is_computing(sample: ResourceSample) -> bool:
    """Some GPU of the job at high util AND power well above a held-idle context."""
    for g in sample.gpus:
        pf = g.power_fraction
        if (g.util_pct or 0) >= GPU_BUSY_UTIL and pf is not None and pf >= GPU_COMPUTING_POWER_FRACTION:
            return True
    return False


def gpu_evidence(act: Activity, limit: int = 4) -> list[str]:
    return gpu_reading_lines(act.gpus, limit)


def gpu_reading_lines(gpus: dict[int, GpuReading], limit: int = 4) -> list[str]:
    """The evidence lines of the job's latest GPU readings (index -> reading)."""
    out = []
    items = sorted(gpus.items())
    for idx, g in items[:limit]:
        head = shared_line(g)  # (a GPU other jobs hold too: the job's own share first)
        parts = [f"GPU{idx}" if head is None else head + ","]
        if g.util_pct is not None and g.gpu_util_pct is None:
            parts.append(f"{g.util_pct:.0f}% util")
        if g.mem_used_mib is not None:
            parts.append(f"{g.mem_used_mib / MIB_PER_GIB:.0f} GB")
        if g.power_w is not None:
            pw = f"{g.power_w:.0f} W"
            if g.power_limit_w:
                pw += f" ({g.power_w / g.power_limit_w:.0%} of limit)"
            parts.append(pw)
        if g.sm_active_pct is not None:
            parts.append(f"SM {g.sm_active_pct:.0f}% active"
                         + (f", tensor {g.tensor_active_pct:.0f}%" if g.tensor_active_pct is not None else ""))
        text = parts[0] + " " + ", ".join(parts[1:])
        out.append(text if head is None else text.rstrip(", "))
    if len(items) > limit:
        utils = [g.util_pct for _, g in items if g.util_pct is not None]
        if utils:
            out.append(f"{len(items)} GPUs, mean {sum(utils) / len(utils):.0f}% util")
    return out


def cpu_evidence(act: Activity) -> str | None:
    return cpu_rate_line(act.cpu_cores, act.child_cores, act.span_s)


def cpu_rate_line(cpu_cores: float | None, child_cores: float | None, span_s: float) -> str | None:
    if cpu_cores is None:
        return None
    window = fmt_duration(span_s)
    if cpu_cores < CPU_FLAT_CORES:
        return f"CPU flat (+{cpu_cores:.2f} cores over {window})"
    text = f"CPU +{cpu_cores:.1f} cores"
    if child_cores and child_cores >= 0.1:
        text += f" ({child_cores:.1f} in children)"
    return text + f" over {window}"


def buffering_of(obs: JobObservation) -> tuple[bool, str | None]:
    """Whether stdout is block-buffered into a file or pipe, and the evidence line."""
    out = obs.stdout
    if out is None:
        return False, None
    target = out.path.rsplit("/", 1)[-1] if out.kind == "file" else out.path
    if not obs.is_python:
        return False, f"stdout -> {target} ({out.kind})"
    if out.kind in ("file", "pipe", "deleted"):
        if obs.unbuffered:
            return False, f"stdout -> {target} ({out.kind}, unbuffered: {obs.unbuffered_reason or 'yes'})"
        if obs.unbuffered is None:
            return False, f"stdout -> {target} ({out.kind}, buffering unknown)"
        return True, f"stdout -> {target} ({out.kind}, no -u, no PYTHONUNBUFFERED)"
    return False, f"stdout -> {target} ({out.kind})"


def progress_evidence(p: Progress | None, with_eta: bool = True) -> str | None:
    if p is None:
        return None
    # The same progress is written twice per judgment (the context, the judged log lines): the last
    # text is kept with the object and the values it was made of (a Progress is updated in place).
    global _progress_memo
    key = (p.step, p.total, p.rate, p.unit, p.loss, p.epoch, p.eta_s, with_eta)
    memo = _progress_memo
    if memo[0] is p and memo[1] == key:
        return memo[2]
    parts = []
    if p.step is not None:
        step = f"{p.step:g}" + (f"/{p.total:g}" if p.total else "")
        parts.append(f"step {step}")
    if p.rate is not None and p.unit:
        parts.append(f"{p.rate:.3g} {p.unit}")
    if p.loss is not None:
        parts.append(f"loss {p.loss:.4g}")
    if p.epoch is not None:
        parts.append(f"epoch {p.epoch:g}")
    if p.eta_s and with_eta:
        parts.append(f"ETA {fmt_duration(p.eta_s)}")
    text = ", ".join(parts) if parts else None
    _progress_memo = (p, key, text)
    return text


_progress_memo: tuple = (None, None, None)  # (progress, its values, text) of the last progress_evidence


def log_evidence(hint, last_growth_at: float | None, observed: bool, progress: Progress | None,
                 now: float) -> tuple[str | None, str | None, str | None]:
    """The evidence lines of a training verdict that the log's new lines move, as `_active` writes
    them: the phase line, how long ago the last line came, the progress (with its ETA)."""
    return (
        log_hint_line(hint) if hint is not None else None,
        log_age_line(log_quiet_s(last_growth_at, observed, now)) if last_growth_at is not None else None,
        progress_evidence(progress),
    )


def log_hint_line(hint) -> str:
    """The evidence line of the phase the log announced (`log_evidence`'s first)."""
    return f"log: {hint.text[:120]}"


def log_quiet_s(last_growth_at: float | None, observed: bool, now: float) -> float:
    """How long the log has been quiet, as the last line's age reads it (0 until the probe has read it)."""
    return max(0.0, now - last_growth_at) if last_growth_at is not None and observed else 0.0


def log_age_line(quiet_s: float) -> str:
    """How long ago the last line came (`log_evidence`'s second): the same text across
    `fmt_duration_span(quiet_s)`."""
    return f"last log line {fmt_duration(quiet_s)} ago"


def bar_full(log: LogFacts) -> bool:
    """Whether the log's phase progress bar (checkpoint shards) reached its total."""
    pp = log.phase_progress
    try:
        return bool(pp) and pp.get("total") is not None and float(pp["step"]) >= float(pp["total"]) > 0
    except (KeyError, TypeError, ValueError):
        return False


def phase_progress_evidence(log: LogFacts) -> str | None:
    pp = log.phase_progress
    if not pp or "step" not in pp:
        return None
    desc = pp.get("desc", "").strip() or (log.phase_progress_phase or "")
    total = f"/{pp['total']}" if "total" in pp else ""
    return f"{desc} {pp['step']}{total}".strip()



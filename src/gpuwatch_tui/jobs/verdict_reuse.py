"""When a job's verdict can be kept: what it was judged from (`Judged`), the bands and steps of noise
within which a new frame changes nothing the engine reads, the deadlines at which the engine's own
clocks (stall_after, the job's rhythm) would change it though nothing else did, and the log lines
a kept verdict refreshes."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from ..vocab import fmt_duration_span
from .job_state import JobState, index_at, lead_process, quiet_limit
from .activity import (
    COMPILE_RECENT_S,
    CPU_BUSY_CORES,
    CPU_FLAT_CORES,
    GPU_BUSY_UTIL,
    GPU_COMPUTING_POWER_FRACTION,
    GPU_IDLE_UTIL,
    GPU_SPIN_UTIL,
    GPU_WORKING_POWER_FRACTION,
    RATE_WINDOW_S,
    YOUNG_S,
    log_age_line,
    log_evidence,
    log_hint_line,
    log_quiet_s,
    progress_evidence,
)
from .observation import ResourceSample
from .verdict import Verdict


# A frame that changes nothing the engine reads (beyond these steps of noise) keeps the verdict, at most
# this long: its evidence (durations, rates) is then refreshed. Timers never wait for it.
REJUDGE_EVERY_S = 5.0
# Verdicts that lines advancing the progress only confirm: such a frame keeps the verdict too (at
# most REJUDGE_EVERY_S); any other line (a phase line, an error, finished, ...) is judged on its frame.
PROGRESS_CONFIRMS = ("training",)
CLOCK_NOISE_S = 0.25  # a host clock offset's jitter between frames (the times read through it)
GPU_UTIL_NOISE = 3.0  # points of util
GPU_POWER_NOISE = 0.02  # of the power limit
GPU_MEM_NOISE_MIB = 64.0
GPU_UTIL_EDGES = tuple(sorted((GPU_IDLE_UTIL, GPU_BUSY_UTIL, GPU_SPIN_UTIL)))  # (sorted: `_edge_band`)
GPU_POWER_EDGES = tuple(sorted((GPU_WORKING_POWER_FRACTION, GPU_COMPUTING_POWER_FRACTION)))
_INF = float("inf")
_ANY = (-_INF, _INF)  # every number: the band of a missing reading (`_edge_band`)
_NO_SPAN = (_INF, -_INF)  # no number: the age span of a missing age line (`keep_log_lines`)


@dataclass(eq=False, slots=True)
class Judged:
    """What a verdict was judged from, kept so that a frame can tell in a handful of comparisons
    whether it may keep the verdict (`verdict_unchanged`).

    `facts`: what new progress lines do not move (`_facts`; None while the log moves and there is no
    verdict such lines could confirm: every such frame is judged anyway). `logs`: each log's position
    and times. `deadline`: the first moment after `at` at which some clock the engine reads passes one
    of its thresholds (`_next_deadline`), less the clock offset's jitter. `settled`: judged on a frame
    without new lines (else the first frame without any is judged too, as a basis). `lines`: the
    verdict's log-moved evidence lines (`kept_log_lines`) when it was judged."""

    seq: int  # the interpreter's line count and the progress's last update: what any new line moves
    progress_at: float | None
    facts: tuple | None
    at: float
    cpu_class: int = -1
    gpus: tuple = ()  # the GpuReadings of the last sample, with their bands (`_gpu_bands`)
    skew: float = 0.0
    started_at: float | None = None
    first_time: float = 0.0  # the oldest sample's time (the engine's "first seen")
    logs: tuple = ()  # per log: (total_bytes, size, mtime, last_growth)
    moving: tuple = ()  # per log clock (`_clock_bases`) at the judgment: its band (`_clock_bands`)
    hint: object = None
    deadline: float = float("-inf")  # of the fixed clocks (process start, first seen, output written)
    log_deadline: float = float("-inf")  # of the log's clocks (last growth, mtime): moved by new lines
    settled: bool = True
    lines: tuple = ()
    lines_hint: object = None  # the hint the phase line of `lines` was made from
    age_span: tuple = _NO_SPAN  # the quiet times whose age line reads as the one of `lines`
    spots: tuple = ()  # where each of `lines` sits in the evidence of `spots_of` (-1: nowhere)
    spots_of: object = None
    # Judged again only for its age (every other fact as at the last judgment): `judge` may then make
    # only the evidence values again. Taken by the next `judge` call.
    refresh: bool = False


def _facts(job: JobState, last: ResourceSample) -> tuple:
    """Everything but the clock and the noisy numbers that the engine reads about a live job and that
    new progress lines do not move. A line that changes any of it (a phase line, an error, finished, an
    exit code, a signal, a restart marker, phase progress) is never a progress-only line. One flat
    tuple of attribute reads: this is built on every kept frame."""
    interp = job.interp
    hint = interp.hint
    failures = interp.failures
    procs = job.procs
    lead = (procs[0] if len(procs) == 1 else lead_process(procs)) if procs else None
    gpus = last.gpus
    if lead is not None:
        out, err = lead.stdout, lead.stderr
        # A stdout/stderr target as the engine reads it: not its size, which the probe reports again as
        # the log grows (each new size re-judged a training job for nothing).
        lead_facts = (None if out is None else (out.path, out.kind, out.append),
                      None if err is None else (err.path, err.kind, err.append),
                      lead.unbuffered, lead.env_readable, lead.unbuffered_reason, lead.is_python)
    else:
        lead_facts = None
    return (
        interp,
        hint.phase if hint is not None else None, hint.detail if hint is not None else None,
        hint.since if hint is not None else None, hint.rule if hint is not None else None,
        len(failures), failures[-1] if failures else None, interp.finished_at,
        interp.exit_code, interp.signal, interp.restart_marker,
        interp.phase_progress_phase, interp.phase_progress,
        _log_states(job.logs),
        job.outdir, job.dump_finding, len(job.actions), job.stall_after_s,
        job.compile_worker_since, job.gpus, last.members, last.states, last.compilers, last.compile_workers,
        (gpus[0].index,) if len(gpus) == 1 else tuple([g.index for g in gpus]),
        lead_facts,
    )


def _log_states(logs: dict) -> tuple:
    """Each log's path, read error and whether the probe has reported on it."""
    if len(logs) == 1:
        for path, b in logs.items():
            return ((path, b.error, b.received),)
    return tuple((path, b.error, b.received) for path, b in logs.items())


def _log_positions(logs: dict) -> tuple:
    """Each log's position and times: what new bytes move."""
    if len(logs) == 1:
        for b in logs.values():
            return ((b.total_bytes, b.size, b.mtime, b.last_growth),)
    return tuple((b.total_bytes, b.size, b.mtime, b.last_growth) for b in logs.values())


def _cpu_class(job: JobState) -> int:
    """The engine's CPU class of the window rate: 0 flat, 1 between, 2 busy, -1 not measured."""
    samples = job.samples
    n = len(samples)
    if n < 2:
        return -1
    last = samples[-1]
    # The oldest sample of the window: where it was on the last frame, counted from the newest (at a
    # steady rate a sample joins the window as one leaves it).
    i = index_at(samples, last.time - RATE_WINDOW_S, job.rate_back)
    job.rate_back = n - i
    first = samples[i] if n - i >= 2 else samples[-2]
    span = last.time - first.time
    if span <= 0 or first.cpu_s is None or last.cpu_s is None:
        return -1
    cores = max(0.0, last.cpu_s - first.cpu_s)
    if first.children_cpu_s is not None and last.children_cpu_s is not None:
        cores += max(0.0, last.children_cpu_s - first.children_cpu_s)
    cores /= span
    return 0 if cores < CPU_FLAT_CORES else 2 if cores >= CPU_BUSY_CORES else 1


def _gpu_bands(gpus: tuple) -> tuple:
    """What `_gpus_close` compares each later reading with, taken once per judgment from its
    GpuReadings: (the reading, its index, util with its band between the engine's util edges, power
    fraction with its band between the power edges, memory)."""
    return tuple([(g, g.index, g.util_pct, *_edge_band(g.util_pct, GPU_UTIL_EDGES), g.power_fraction,
                   *_edge_band(g.power_fraction, GPU_POWER_EDGES), g.mem_used_mib) for g in gpus])


def _edge_band(a: float | None, edges: tuple[float, ...]) -> tuple[float, float]:
    """[lo, hi): the values on the same side of every edge as `a` (`_crosses` says no for them), from
    the sorted `edges`: between the edges at or below `a` and those above it (a NaN is below none, as
    `a < e` is false for each: above all of them)."""
    if a is None:
        return _ANY
    i = bisect_right(edges, a)
    return (edges[i - 1] if i else -_INF), (edges[i] if i < len(edges) else _INF)


def _gpus_close(kept: tuple, b: tuple, no_spin: bool = False) -> bool:
    """The same GPU facts (the judgment's `_gpu_bands`, this frame's GpuReadings) within noise: no
    rule's threshold lies within these steps of a reading except where a GPU sits right at one (then
    the reading must not move at all). A reading outside its band is asked `_crosses` (the band
    answers as it does for every number; a NaN reading goes through the test as before). `no_spin`:
    also False where a GPU of `b` could be spinning (at spin util below working power, within noise:
    the engine then reads the quiet period's extremes), asked in the same loop."""
    if len(kept) != len(b):
        return False
    for (ga, index, ua, ulo, uhi, pa, plo, phi, ma), gb in zip(kept, b):
        ub = gb.util_pct
        # (GpuReading.power_fraction, inlined: this runs for every GPU of every kept frame)
        pb = None if gb.power_w is None or not gb.power_limit_w else gb.power_w / gb.power_limit_w
        if no_spin and ub is not None and ub >= _SPIN_UTIL_FROM and (pb is None or pb < _SPIN_POWER_BELOW):
            return False
        if ga is gb:
            continue
        if index != gb.index or (ua is None) != (ub is None):
            return False
        if ua is not None and (abs(ua - ub) > GPU_UTIL_NOISE
                               or not ulo <= ub < uhi and _crosses(ua, ub, GPU_UTIL_EDGES)):
            return False
        if (pa is None) != (pb is None):
            return False
        if pa is not None and (abs(pa - pb) > GPU_POWER_NOISE
                               or not plo <= pb < phi and _crosses(pa, pb, GPU_POWER_EDGES)):
            return False
        mb = gb.mem_used_mib
        if (ma is None) != (mb is None) or (ma is not None and abs(ma - mb) > GPU_MEM_NOISE_MIB):
            return False
    return True


_SPIN_UTIL_FROM = GPU_SPIN_UTIL - GPU_UTIL_NOISE
_SPIN_POWER_BELOW = GPU_WORKING_POWER_FRACTION + GPU_POWER_NOISE


def _crosses(a: float, b: float, edges: tuple[float, ...]) -> bool:
    """Whether an edge lies between a and b (one below it, the other not). (A loop, not any() over
    a generator: this runs for every GPU of every kept frame.)"""
    for e in edges:
        if (a < e) != (b < e):
            return True
    return False


def _clock_bases(job: JobState, skew: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The times the engine measures how long ago from, as (those new log lines move: the log's last
    growth and mtime; the others: the process start, first seen, output written): a rule can flip
    only when now passes one of these plus one of its thresholds (`_offsets`)."""
    moving = []
    for b in job.logs.values():
        if b.last_growth is not None:
            moving.append(b.last_growth)
        if b.mtime is not None:
            moving.append(b.mtime)
    fixed = [job.samples[0].time]
    if job.started_at is not None:
        fixed.append(job.started_at + skew)
    if job.outdir is not None and job.outdir.newest_mtime is not None:
        fixed.append(job.outdir.newest_mtime)
    return tuple(moving), tuple(fixed)


def _next_deadline(bases: tuple[float, ...], stall_after: float, at: float, quiet_limit: float | None = None) -> float:
    """The first moment after `at` at which `now - base` reaches one of the engine's thresholds for
    some base, less CLOCK_NOISE_S (a base read through the host's clock offset jitters by that much:
    judged up to that early, never late). A base from after `at` (a clock skew): at once."""
    offsets = _offsets(stall_after, quiet_limit)
    first = float("inf")
    for base in bases:
        if base > at:
            return float("-inf")
        # The smallest threshold base + offset > at (sorted: found by bisection). The `since < base +
        # off` of the frame-by-frame test is kept exactly: rounding cannot tell a different story.
        i = bisect_right(offsets, at - base - _ROUNDING_S)
        while i < len(offsets) and not base + offsets[i] > at:
            i += 1
        if i < len(offsets) and base + offsets[i] < first:
            first = base + offsets[i]
    return first - CLOCK_NOISE_S


def verdict_unchanged(job: JobState, now: float, skew: float) -> bool:
    """Whether this frame may keep the job's verdict: nothing the engine reads changed beyond noise,
    no timer of the engine ran out since it was judged, no hysteresis count is under way, and the
    verdict's evidence (durations, rates) is at most REJUDGE_EVERY_S old. A training job whose only
    change is new lines that advance its progress keeps it too: such lines confirm the verdict, whose
    log-moved evidence lines (phase line, last line's age, progress and ETA) are refreshed on the frame
    (`_refresh_log_lines`); its other evidence is at most REJUDGE_EVERY_S old, as on any kept frame.
    Records the new basis when it returns False (the caller judges).

    Cheapest first: the kept basis holds the next clock deadline and the readings, so a steady frame
    costs a few comparisons, one flat tuple (`_facts`) and a bisection (`_cpu_class`)."""
    v = job.verdict
    kept = job.judged
    interp = job.interp
    samples = job.samples
    if interp is None or not samples:
        return False
    last = samples[-1]
    seq, progress_at = interp.seq, interp.progress.current.updated_at
    log_moved = kept is None or kept.seq != seq or kept.progress_at != progress_at
    if log_moved and (v is None or v.phase not in PROGRESS_CONFIRMS or interp.last_progress_at is None):
        # New lines and no verdict they could confirm: judged. The full basis is taken on the first
        # frame without any (one more judgment per quiet spell), so such a job costs nothing here.
        job.judged = Judged(seq, progress_at, None, now, settled=False)
        return False
    # A verdict older than REJUDGE_EVERY_S is judged again, even where nothing else changed: then the
    # judgment may make only its evidence values again (`judge`, `Judged.refresh`). (REJUDGE_EVERY_S = 0:
    # every frame judged in full, the reference the tests compare with.)
    fresh = kept is not None and now - kept.at < REJUDGE_EVERY_S
    facts = cpu_class = None
    same = (
        kept is not None and kept.facts is not None and v is not None and v.memory.pending is None
        and job.exit is None and bool(job.members) and (fresh or REJUDGE_EVERY_S > 0) and now < kept.deadline
        and kept.started_at == job.started_at and abs(kept.skew - skew) <= CLOCK_NOISE_S
        and kept.first_time == samples[0].time
        # no compiler process seen in a sample of the compile window (or a second before it)
        and (job.compilers_at is None or job.compilers_at < now - COMPILE_RECENT_S - 1.0)
        and _gpus_close(kept.gpus, last.gpus, no_spin=True)
    )
    if same:
        cpu_class = _cpu_class(job)
        same = kept.cpu_class == cpu_class
    if same:
        facts = _facts(job, last)
        same = kept.facts == facts
        if not same:
            pass
        elif log_moved:
            # Only new lines that advanced the progress, on a verdict that already showed all three
            # log-moved lines (a first progress line adds one: judged).
            same = (interp.last_progress_at > kept.at and bool(kept.lines) and None not in kept.lines
                    and not _log_clocks_crossed(kept.moving, job.logs.values(), now))
            if same and fresh:
                _refresh_log_lines(job, kept, now)
        else:
            same = (kept.settled and kept.logs == _log_positions(job.logs) and interp.hint is kept.hint
                    and now < kept.log_deadline)
    if same and fresh:
        return True
    # The new basis (the facts and CPU class just compared are this frame's: not made twice)
    moving, fixed = _clock_bases(job, skew)
    stall = job.stall_after_s
    limit = quiet_limit(job)
    job.judged = Judged(seq, progress_at, _facts(job, last) if facts is None else facts, now,
                        _cpu_class(job) if cpu_class is None else cpu_class, _gpu_bands(last.gpus), skew,
                        job.started_at, samples[0].time, _log_positions(job.logs), _clock_bands(moving, stall, now, limit),
                        interp.hint,
                        _next_deadline(fixed, stall, now, limit), _next_deadline(moving, stall, now, limit),
                        settled=not log_moved, refresh=same)
    return False


def _clock_bands(bases: tuple[float, ...], stall_after: float, then: float,
                 quiet_limit: float | None = None) -> tuple[tuple[float, float], ...]:
    """Per log clock at the judgment (`then`): the band [lo, hi) of "how long ago" values in which
    every threshold of the engine answers as it did then. `bisect_right(offsets, x)` counts the
    thresholds <= x: it equals its value at the judgment, c, exactly when offsets[c - 1] <= x <
    offsets[c]. Taken once per judgment, so a frame compares each clock with two numbers."""
    offsets = _offsets(stall_after, quiet_limit)
    n = len(offsets)
    bands = []
    for base in bases:
        c = bisect_right(offsets, then - base)
        bands.append((offsets[c - 1] if c else float("-inf"), offsets[c] if c < n else float("inf")))
    return tuple(bands)


def _log_clocks_crossed(bands: tuple, logs, now: float) -> bool:
    """Whether some rule reading how long ago a log clock was ("quiet for X") would answer now
    otherwise than at the judgment: each clock of the logs (their buffers: last growth, then mtime,
    as `_clock_bases` lists them), moved by new lines or not, against its band (`_clock_bands`)."""
    k, n = 0, len(bands)
    for b in logs:
        for t in (b.last_growth, b.mtime):
            if t is None:
                continue
            if k == n or t > now:  # another number of clocks, or a time from the future (a clock skew)
                return True
            lo, hi = bands[k]
            k += 1
            if not lo <= now - t < hi:
                return True
    return k != n


@dataclass
class _Clock:
    """A log clock alone, as `_log_clocks_crossed` reads a buffer."""

    last_growth: float
    mtime: float | None = None


def _clock_crossed(before: tuple[float, ...], after: tuple[float, ...], stall_after: float,
                   then: float, now: float) -> bool:
    """`_log_clocks_crossed` for clocks given as lists: whether some rule reading how long ago a
    log-moved time was would answer now (`after`) otherwise than at the judgment (`before`, `then`)."""
    if len(before) != len(after):
        return True
    return _log_clocks_crossed(_clock_bands(before, stall_after, then), [_Clock(t) for t in after], now)


_ROUNDING_S = 1e-6  # slack for the bisection in _next_deadline (the exact test follows it)


@lru_cache(maxsize=64)
def _offsets(stall_after: float, quiet_limit: float | None = None) -> tuple[float, ...]:
    """The thresholds the engine compares "how long ago" with (phase.py), sorted: the job's age
    (`age < threshold`, `age < min(threshold, YOUNG_S)`), the log's quiet time (`quiet_s <
    threshold`, `>= 60`, `< min(60, threshold / 2)`) and the output dir's last write (`< threshold`).
    The rate and compile windows are not here: the CPU class and recent compilers are compared on
    every frame (`verdict_unchanged`), a spin is always judged. A rule that compares a new duration with
    `now` must add its threshold here (tests/jobs/test_kept_verdicts.py fails otherwise)."""
    limits = {0.0, stall_after, min(stall_after, YOUNG_S), 60.0, min(60.0, stall_after / 2)}
    if quiet_limit is not None:
        limits.add(quiet_limit)  # the job's rhythm's (cadence.py)
    return tuple(sorted(limits))


def _log_inputs(logs: dict) -> tuple:
    """(the newest last growth of the job's logs, whether the probe has read each of them)."""
    if len(logs) == 1:
        for b in logs.values():
            return b.last_growth, b.received
    last_growth, observed = None, True
    for b in logs.values():
        if b.last_growth is not None and (last_growth is None or b.last_growth > last_growth):
            last_growth = b.last_growth
        observed = observed and b.received
    return last_growth, observed


def kept_log_lines(job: JobState, now: float) -> tuple:
    """The verdict's log-moved evidence lines as of now (`log_evidence`)."""
    interp = job.interp
    last_growth, observed = _log_inputs(job.logs)
    progress = interp.progress.current
    return log_evidence(interp.hint, last_growth, observed, progress if progress.updated_at is not None else None, now)


def keep_log_lines(job: JobState, kept: Judged, lines: tuple, now: float) -> None:
    """Keep `lines` (`kept_log_lines` at `now`) with what they were made of: the hint of the phase line and
    the span of quiet times that writes the same age line (`_refresh_log_lines` makes again only the
    lines whose input left those)."""
    kept.lines = lines
    kept.lines_hint = job.interp.hint
    last_growth, observed = _log_inputs(job.logs)
    kept.age_span = fmt_duration_span(log_quiet_s(last_growth, observed, now)) if last_growth is not None else _NO_SPAN
    kept.spots_of = None  # the lines' places in the verdict's evidence: found again when next asked


def _refresh_log_lines(job: JobState, kept: Judged, now: float) -> None:
    """The kept verdict with its log-moved evidence lines (phase line, last line's age, progress and
    ETA) as of now: what judging this frame would write there. (Called where none of the kept lines
    is None.) Each line is made again only where what it is made of moved: the phase line with a new
    hint, the age line when the quiet time leaves the span its text holds for, the progress line
    with new values (`progress_evidence` keeps its last text); each new one takes the place of the
    old one in the evidence."""
    interp = job.interp
    hint = interp.hint
    progress = interp.progress.current
    old = kept.lines
    hint_line, age_line, progress_line = old
    if hint is not kept.lines_hint:
        hint_line = log_hint_line(hint) if hint is not None else None
    last_growth, observed = _log_inputs(job.logs)
    if last_growth is None:
        age_line = None
    else:
        quiet = log_quiet_s(last_growth, observed, now)
        lo, hi = kept.age_span
        if not lo <= quiet < hi:
            age_line = log_age_line(quiet)
            kept.age_span = fmt_duration_span(quiet)
    progress_line = progress_evidence(progress if progress.updated_at is not None else None)
    fresh = (hint_line, age_line, progress_line)
    kept.lines_hint = hint
    if fresh == old:
        return
    v = job.verdict
    was = v.evidence  # unique lines (judge dedupes them): each old line sits at one place
    if kept.spots_of is not v:
        kept.spots = tuple([was.index(line) if line in was else -1 for line in old])
    evidence = list(was)
    spots = kept.spots
    regular = True  # each changed line in its place, none None, empty or equal to another line
    for i in (0, 1, 2):
        line = fresh[i]
        if line != old[i]:
            at = spots[i]
            if at < 0 or not line or line in evidence:
                regular = False
                break
            evidence[at] = line
    if not regular:
        evidence = list(was)
        for line, new in zip(old, fresh):
            if line != new and line in was:
                evidence[was.index(line)] = new
        evidence = dict.fromkeys(e for e in evidence if e)  # as judge writes them: no empty, no repeat
    v = job.verdict = Verdict(v.phase, v.since, v.confidence, v.detail, tuple(evidence), v.advice, v.actions,
                              v.memory)
    kept.lines = fresh
    kept.spots_of = v if regular else None

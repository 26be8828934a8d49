"""Judging a job: follow its processes to their end, turn each frame into a resource sample, build
the phase engine's observation and record the verdict (with the phase history)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter

from ..model import ExitInfo, HostSample, ProcInfo
from .discovery import launcher_kind
from .ended_by import ended_by
from .job_actions import annotate
from .job_state import JobState
from .phase import (
    COMPILE_RECENT_S,
    COMPILE_WORKER_MARK,
    COMPILER_NAMES,
    CPU_BUSY_CORES,
    CPU_FLAT_CORES,
    GPU_BUSY_UTIL,
    GPU_COMPUTING_POWER_FRACTION,
    GPU_IDLE_UTIL,
    GPU_SPIN_UTIL,
    GPU_WORKING_POWER_FRACTION,
    MID_RUN_S,
    MIN_SPIN_S,
    RATE_WINDOW_S,
    YOUNG_S,
    ExitFacts,
    GpuReading,
    JobObservation,
    LogFacts,
    OutputFacts,
    ResourceSample,
    Verdict,
    infer_phase,
    log_evidence,
)

WINDOW_S = 900.0  # resource samples kept per job (the engine looks back at most this far)
# Every sample of the last DENSE_S is kept (the engine's rates read the last RATE_WINDOW_S); older ones
# one per SPARSE_EVERY_S (what is read that far back: when the job was first seen, when its GPUs last
# computed). A full window at 1 Hz was ~700 bytes x 900 per job: 650 MB for 1024 jobs.
DENSE_S = 60.0
SPARSE_EVERY_S = 10.0
GONE_GRACE_SAMPLES = 2  # a watched pid missing this many frames in a row (without ExitInfo) is gone
MAX_HISTORY = 200
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
GPU_UTIL_EDGES = (GPU_IDLE_UTIL, GPU_BUSY_UTIL, GPU_SPIN_UTIL)
GPU_POWER_EDGES = (GPU_WORKING_POWER_FRACTION, GPU_COMPUTING_POWER_FRACTION)


def track_members(job: JobState, procs: dict[int, ProcInfo], gone: dict, skew: float, now: float) -> None:
    """Notice members that went away; when all have, the job has ended (`job.exit`)."""
    for pid, start in list(job.members.items()):
        p = procs.get(pid)
        if p is not None and abs(p.start_time - start) < 0.5 and p.state != "Z":
            job.missing.pop(pid, None)
            continue
        if p is not None and p.state == "Z" and pid not in job.exit_infos:
            # Exited, not yet reaped by its parent: as gone as it gets.
            job.exit_infos[pid] = ExitInfo(pid, start, now - skew)
        info = gone.get((pid, round(start, 2)))
        if info is None:
            info = next((g for (gp, _), g in gone.items() if gp == pid), None)
        if info is not None:
            job.exit_infos[pid] = info
        job.missing[pid] = job.missing.get(pid, 0) + 1
    alive = [pid for pid in job.members if job.missing.get(pid, 0) == 0]
    dead = [pid for pid in job.members if pid in job.exit_infos or job.missing.get(pid, 0) >= GONE_GRACE_SAMPLES]
    if alive or len(dead) < len(job.members):
        return
    root_pid = job.root[0] if job.root else None
    root_info = job.exit_infos.get(root_pid) if root_pid is not None else None
    infos = list(job.exit_infos.values())
    ended = min((i.seen_gone_at + skew for i in infos), default=now)
    code = root_info.exit_code if root_info else next((i.exit_code for i in infos if i.exit_code is not None), None)
    sig = root_info.signal if root_info else next((i.signal for i in infos if i.signal is not None), None)
    job.exit = ExitFacts(min(ended, now), code, sig)


def observe(job: JobState, sample: HostSample, on_gpu: dict[int, list[int]], skew: float, now: float) -> None:
    """Record this frame's resource sample for `job`, then judge it."""
    frame_procs = sample.procs
    procs = []
    for pid, start in job.members.items():
        p = frame_procs.get(pid)
        if p is not None and abs(p.start_time - start) < 0.5:
            procs.append(p)
    root_pid = job.root[0] if job.root else None
    if len(procs) > 1:
        procs.sort(key=lambda p: (p.pid != root_pid, p.pid))  # root (launcher) first
    job.procs = procs  # an ended job lists none: its last facts would read as a live process
    if procs:
        job.last_procs = procs  # but the verdict on its end still needs them (stdout, -u)
    main = {p.pid for p in procs}
    tops = [p for p in procs if p.ppid not in main]
    children = {}
    for p in procs:
        for c in p.children:
            if c.pid not in main:
                children[c.pid] = c
    job_pids = main | set(children)
    gpus = []
    gpu_indices = set(job.gpus)
    # The job's GPUs from the frame's pid -> GPU map: every job of a host would otherwise scan every GPU.
    held = {i for pid in job_pids for i in on_gpu.get(pid, ())}
    for g in sample.gpus if held else ():
        if g.index in held and any(gp.pid in job_pids for gp in g.processes):
            gpus.append(GpuReading(g.index, g.util_pct, g.mem_used_mib, g.power_w, g.power_limit_w))
            gpu_indices.add(g.index)
    job.gpus = tuple(sorted(gpu_indices))
    named = {c.name for c in children.values() if c.name in COMPILER_NAMES}
    for p in procs:
        if p.compilers_seen:
            named.update(p.compilers_seen)
    compilers = tuple(sorted(named)) if named else ()
    workers = sum(1 for c in children.values() if COMPILE_WORKER_MARK in " ".join(c.cmdline))
    if workers and job.compile_worker_since is None:
        job.compile_worker_since = now
    if procs:
        main_cpu = sum(p.cpu_s for p in procs)
        tree_cpu = sum(p.cpu_s + p.cpu_children_s for p in tops)
        rs = ResourceSample(
            time=now, cpu_s=main_cpu, children_cpu_s=max(0.0, tree_cpu - main_cpu), gpus=tuple(gpus),
            states=tuple(p.state for p in procs), compilers=compilers, compile_workers=workers,
            rank_cpu_s=tuple((p.pid, p.cpu_s) for p in procs if p.pid in on_gpu or len(procs) == 1),
            log_bytes=sum(b.total_bytes for b in job.logs.values()),
            members=tuple(sorted(main)),
        )
        job.samples.append(rs)
        while job.samples and now - job.samples[0].time > WINDOW_S:
            job.samples.popleft()
        _thin(job, now)
    for buf in job.logs.values():
        buf.tick(now)
    if not procs or not _unchanged(job, now, skew):
        judge(job, now, skew)


def _thin(job: JobState, now: float) -> None:
    """Samples that left the dense part since the last frame: drop each one closer than SPARSE_EVERY_S
    to the older sample kept before it. The oldest is always kept, and so are the last two."""
    samples = job.samples
    last = min(bisect_left(samples, now - DENSE_S, key=_time) - 1, len(samples) - 3)  # the newest that may go
    k = max(bisect_right(samples, job.sparse_upto, key=_time), 1)  # the oldest not looked at yet
    while k <= last:
        if samples[k].time - samples[k - 1].time < SPARSE_EVERY_S:
            del samples[k]
            last -= 1
        else:
            k += 1
    if last >= 0:
        job.sparse_upto = max(job.sparse_upto, samples[last].time)


_time = attrgetter("time")  # a sample's time: the bisection key (a C call, not a Python function)


def observation(job: JobState, skew: float) -> JobObservation:
    """What the phase engine reads about `job`: its samples, log facts, stdout target, exit."""
    interp = job.interp
    log = job.primary_log
    last_growth = max((b.last_growth for b in job.logs.values() if b.last_growth is not None), default=None)
    facts = LogFacts(
        path=next(iter(job.logs), None),
        total_bytes=sum(b.total_bytes for b in job.logs.values()),
        last_growth_at=last_growth,
        hint=interp.hint,
        failure=interp.failure,
        failures=len(interp.failures),
        finished_at=interp.finished_at,
        progress=interp.progress.current if interp.progress.current.updated_at is not None else None,
        last_progress_at=interp.last_progress_at,
        exit_code=interp.exit_code,
        signal=interp.signal,
        phase_progress=dict(interp.phase_progress),
        phase_progress_phase=interp.phase_progress_phase,
        error=log.error if log else None,
        observed=all(b.received for b in job.logs.values()),
        size=(sum(b.size for b in job.logs.values())
              if job.logs and all(b.size is not None for b in job.logs.values()) else None),
        mtime=max((b.mtime for b in job.logs.values() if b.mtime is not None), default=None),
    )
    lead = lead_process(job.procs or job.last_procs)
    out = None
    if job.outdir is not None and job.outdir.exists:
        d = job.outdir
        out = OutputFacts(d.path, d.newest_mtime, d.newest_name, d.files, d.total_bytes)
    return JobObservation(
        samples=job.samples,  # read, never kept, by the engine: no copy of up to WINDOW_S samples
        stall_after_s=job.stall_after_s,
        started_at=(job.started_at + skew) if job.started_at is not None else None,
        log=facts,
        stdout=lead.stdout if lead else None,
        stderr=lead.stderr if lead else None,
        unbuffered=(lead.unbuffered if lead.env_readable or lead.unbuffered else None) if lead else None,
        unbuffered_reason=lead.unbuffered_reason if lead else "",
        is_python=lead.is_python if lead else True,
        exit=job.exit,
        output=out,
        has_gpus=bool(job.gpus),
        compile_worker_since=job.compile_worker_since,
        killed_by=_killed_by(job),
    )


def _killed_by(job: JobState) -> str | None:
    """Who ended this run through gpuwatch: this gpuwatch's own record, else a restart's marker line in
    the log that names one of the run's pids (a restart done by another gpuwatch)."""
    if job.exit is None:
        return None
    mine = ended_by(job.actions, job.serial, job.exit.ended_at)
    marker = job.interp.restart_marker if job.interp is not None else None
    if mine is None and marker is not None and marker.old_pid in job.members:
        return marker.text()
    return mine


@dataclass
class Judged:
    """What a verdict was judged from: the log's position, the frame's facts (`_facts`; None while the
    log moves and no verdict it could confirm: every such frame is judged anyway), its time, the CPU
    class of the window rate, the GPU readings, the times at which some rule of the engine reads a
    clock (`_clock_bases`: those log lines move, the others), and whether it was judged on a frame
    without new lines (`settled`: else the first frame without any is judged too, as a basis)."""

    log_at: tuple
    facts: tuple | None
    at: float
    cpu_class: int
    gpus: tuple
    bases: tuple
    settled: bool = True
    lines: tuple = ()  # the verdict's log-moved evidence lines (`_log_lines`) when it was judged


def _facts(job: JobState, skew: float) -> tuple[tuple, tuple]:
    """Everything but the clock and the noisy numbers that the engine reads about a live job, as
    (what new progress lines move, the rest). A line that changes the rest (a phase line, an error,
    finished, an exit code, a signal, a restart marker, phase progress) is never a progress-only line."""
    interp = job.interp
    last = job.samples[-1]
    lead = lead_process(job.procs)
    hint = interp.hint
    logs = job.logs.values()
    moving = (
        interp.seq, interp.progress.current.updated_at, hint, interp.last_progress_at,
        tuple((b.total_bytes, b.size, b.mtime, b.last_growth) for b in logs),
    )
    rest = (
        (hint.phase, hint.detail, hint.since, hint.rule) if hint is not None else None,
        len(interp.failures), interp.failures[-1] if interp.failures else None, interp.finished_at,
        interp.exit_code, interp.signal, interp.restart_marker,
        interp.phase_progress_phase, tuple(interp.phase_progress.items()),
        tuple(job.logs), tuple((b.error, b.received) for b in logs),
        job.exit, job.outdir, job.dump_finding, len(job.actions), job.stall_after_s,
        job.compile_worker_since, tuple(job.gpus), last.members, last.states, last.compilers, last.compile_workers,
        tuple(g.index for g in last.gpus),
        (_target(lead.stdout), _target(lead.stderr), lead.unbuffered, lead.env_readable, lead.unbuffered_reason,
         lead.is_python)
        if lead else None,
    )
    return moving, rest


def _target(fd) -> tuple | None:
    """What the engine reads of a stdout/stderr target: not its size, which the probe reports again
    as the log grows (each new size re-judged a training job for nothing)."""
    return None if fd is None else (fd.path, fd.kind, fd.append)


def _cpu_class(samples) -> int:
    """The engine's CPU class of the window rate: 0 flat, 1 between, 2 busy, -1 not measured."""
    if len(samples) < 2:
        return -1
    last = samples[-1]
    since = last.time - RATE_WINDOW_S
    first, count = None, 0  # the oldest sample of the window (walked from the end: no list built)
    for s in reversed(samples):
        if s.time < since:
            break
        first, count = s, count + 1
    if count < 2:
        first = samples[-2]
    span = last.time - first.time
    if span <= 0 or first.cpu_s is None or last.cpu_s is None:
        return -1
    cores = max(0.0, last.cpu_s - first.cpu_s)
    if first.children_cpu_s is not None and last.children_cpu_s is not None:
        cores += max(0.0, last.children_cpu_s - first.children_cpu_s)
    cores /= span
    return 0 if cores < CPU_FLAT_CORES else 2 if cores >= CPU_BUSY_CORES else 1


def _gpu_readings(last) -> tuple:
    return tuple((g.index, g.util_pct, g.power_fraction, g.mem_used_mib) for g in last.gpus)


def _gpus_close(a: tuple, b: tuple) -> bool:
    """The same GPU facts within noise: no rule's threshold lies within these steps of a reading
    except where a GPU sits right at one (then the reading must not move at all)."""
    if len(a) != len(b):
        return False
    for (ia, ua, pa, ma), (ib, ub, pb, mb) in zip(a, b):
        if ia != ib or (ua is None) != (ub is None) or (pa is None) != (pb is None) or (ma is None) != (mb is None):
            return False
        if ua is not None and (abs(ua - ub) > GPU_UTIL_NOISE or _crosses(ua, ub, GPU_UTIL_EDGES)):
            return False
        if pa is not None and (abs(pa - pb) > GPU_POWER_NOISE or _crosses(pa, pb, GPU_POWER_EDGES)):
            return False
        if ma is not None and abs(ma - mb) > GPU_MEM_NOISE_MIB:
            return False
    return True


def _crosses(a: float, b: float, edges: tuple[float, ...]) -> bool:
    """Whether an edge lies between a and b (one below it, the other not). (A loop, not any() over
    a generator: this runs for every GPU of every kept frame.)"""
    for e in edges:
        if (a < e) != (b < e):
            return True
    return False


def _clock_bases(job: JobState, skew: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The times the engine measures durations from, as (those new log lines move: quiet since, log
    mtime, last phase line, last progress; the others: first seen, started, output written, compile
    workers): a rule can flip only when now passes one of these plus one of its thresholds
    (`_deadline_passed`)."""
    interp = job.interp
    moving = []
    for b in job.logs.values():
        if b.last_growth is not None:
            moving.append(b.last_growth)
        if b.mtime is not None:
            moving.append(b.mtime)
    if interp.hint is not None:
        moving.append(interp.hint.time)
    if interp.last_progress_at is not None:
        moving.append(interp.last_progress_at)
    fixed = [job.samples[0].time]
    if job.started_at is not None:
        fixed.append(job.started_at + skew)
    if interp.hint is not None:
        fixed.append(interp.hint.since)
    if job.outdir is not None and job.outdir.newest_mtime is not None:
        fixed.append(job.outdir.newest_mtime)
    if job.compile_worker_since is not None:
        fixed.append(job.compile_worker_since)
    return tuple(moving), tuple(fixed)


def _deadline_passed(bases: tuple[float, ...], stall_after: float, since: float, now: float) -> bool:
    """Whether some clock the engine reads passed one of its thresholds in (since, now]."""
    offsets = _offsets(stall_after)
    for base in bases:
        if base > since:
            return True  # a time from the future of the last judgment (a clock skew): judge
        # Only the offsets near (since - base, now - base] can pass (sorted: found by bisection); the
        # exact test is then made on those, as written, so rounding cannot tell a different story.
        i = bisect_left(offsets, since - base - _ROUNDING_S)
        top = now - base + _ROUNDING_S
        while i < len(offsets) and offsets[i] <= top:
            if since < base + offsets[i] <= now:
                return True
            i += 1
    return False


def _unchanged(job: JobState, now: float, skew: float) -> bool:
    """Whether this frame may keep the job's verdict: nothing the engine reads changed beyond noise,
    no timer of the engine ran out since it was judged, no hysteresis count is under way, and the
    verdict's evidence (durations, rates) is at most REJUDGE_EVERY_S old. A training job whose only
    change is new lines that advance its progress keeps it too: such lines confirm the verdict, whose
    log-moved evidence lines (phase line, last line's age, progress and ETA) are refreshed on the frame
    (`_refresh_log_lines`); its other evidence is at most REJUDGE_EVERY_S old, as on any kept frame. Records the new basis when
    it returns False (the caller judges)."""
    v = job.verdict
    kept = job.judged
    interp = job.interp
    if interp is None or not job.samples:
        return False
    log_at = (interp.seq, interp.progress.current.updated_at)
    log_moved = not isinstance(kept, Judged) or kept.log_at != log_at
    if log_moved and (v is None or v.phase not in PROGRESS_CONFIRMS or interp.last_progress_at is None):
        # New lines and no verdict they could confirm: judged. The full basis is taken on the first
        # frame without any (one more judgment per quiet spell), so such a job costs nothing here.
        job.judged = Judged(log_at, None, now, -1, (), (), settled=False)
        return False
    facts = _facts(job, skew)
    cpu = _cpu_class(job.samples)
    gpus = _gpu_readings(job.samples[-1])
    moving, fixed = _clock_bases(job, skew)
    same = (
        isinstance(kept, Judged) and kept.facts is not None and v is not None and v.memory.pending is None
        and job.exit is None and job.alive and now - kept.at < REJUDGE_EVERY_S
        and kept.cpu_class == cpu
        and not _spin_possible(job.samples[-1]) and not _compilers_recent(job.samples, now)
        and _gpus_close(kept.gpus, gpus)
        and _bases_close(kept.bases[1], fixed) and not _deadline_passed(fixed, job.stall_after_s, kept.at, now)
    )
    if same and log_moved:
        # Only new lines that advanced the progress, on a verdict that already showed all three
        # log-moved lines (a first progress line adds one: judged).
        same = (kept.facts[1] == facts[1] and interp.last_progress_at > kept.at
                and bool(kept.lines) and None not in kept.lines
                and not _clock_crossed(kept.bases[0], moving, job.stall_after_s, kept.at, now))
        if same:
            _refresh_log_lines(job, kept, now)
    elif same:
        same = kept.settled and kept.facts == facts and kept.bases[0] == moving and not _deadline_passed(
            moving, job.stall_after_s, kept.at, now)
    if not same:
        job.judged = Judged(log_at, facts, now, cpu, gpus, (moving, fixed), settled=not log_moved)
    return same


def _bases_close(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """The same times within CLOCK_NOISE_S: a process start is read through the host's clock offset,
    measured anew on every frame (now - the frame's time) and so jittering by the link's latency."""
    return len(a) == len(b) and all(abs(x - y) <= CLOCK_NOISE_S for x, y in zip(a, b))


def _clock_crossed(before: tuple[float, ...], after: tuple[float, ...], stall_after: float,
                   then: float, now: float) -> bool:
    """Whether some rule reading how long ago a log-moved time was ("quiet for X") would answer now
    otherwise than at the judgment (`then`): the same time, moved by new lines or not, compared
    with each threshold of the engine at both moments."""
    if len(before) != len(after):
        return True
    offsets = _offsets(stall_after)
    for old, new in zip(before, after):
        if new > now:
            return True  # a time from the future (a clock skew): judge
        # The same answer for every threshold <=> as many (sorted) thresholds reached at both moments.
        if bisect_right(offsets, then - old) != bisect_right(offsets, now - new):
            return True
    return False


_ROUNDING_S = 1e-6  # slack for the bisection in _deadline_passed (the exact test follows it)


@lru_cache(maxsize=64)
def _offsets(stall_after: float) -> tuple[float, ...]:
    """The engine's thresholds, sorted (bisected by _deadline_passed and _clock_crossed)."""
    return tuple(sorted((0.0, stall_after, stall_after / 2, min(60.0, stall_after / 2), 60.0, YOUNG_S,
                         min(stall_after, YOUNG_S), MIN_SPIN_S, RATE_WINDOW_S, COMPILE_RECENT_S, MID_RUN_S)))


def _log_lines(job: JobState, now: float) -> tuple:
    interp = job.interp
    last_growth, observed = None, True
    for b in job.logs.values():
        if b.last_growth is not None and (last_growth is None or b.last_growth > last_growth):
            last_growth = b.last_growth
        observed = observed and b.received
    progress = interp.progress.current
    return log_evidence(interp.hint, last_growth, observed, progress if progress.updated_at is not None else None, now)


def _refresh_log_lines(job: JobState, kept: Judged, now: float) -> None:
    """The kept verdict with its log-moved evidence lines (phase line, last line's age, progress and
    ETA) as of now: what judging this frame would write there."""
    fresh = _log_lines(job, now)
    if fresh == kept.lines:
        return
    swap = {old: new for old, new in zip(kept.lines, fresh) if old is not None}
    v = job.verdict
    evidence = tuple(dict.fromkeys(e for e in (swap.get(e, e) for e in v.evidence) if e))
    job.verdict = Verdict(v.phase, v.since, v.confidence, v.detail, evidence, v.advice, v.actions, v.memory)
    kept.lines = fresh


def _spin_possible(last) -> bool:
    """A GPU at spin util below working power: the engine reads the quiet period's extremes then."""
    return any(g.util_pct is not None and g.util_pct >= GPU_SPIN_UTIL - GPU_UTIL_NOISE
               and (g.power_fraction is None or g.power_fraction < GPU_WORKING_POWER_FRACTION + GPU_POWER_NOISE)
               for g in last.gpus)


def _compilers_recent(samples, now: float) -> bool:
    since = now - COMPILE_RECENT_S - 1.0
    for s in reversed(samples):
        if s.time < since:
            return False
        if s.compilers:
            return True
    return False


def judge(job: JobState, now: float, skew: float) -> None:
    if not job.members and job.spec is not None and job.exit is None:
        if not job.first_seen:
            job.first_seen = now  # made from the config before any sample: looking since now
        how = f"cmdline /{job.spec.match}/" if job.spec.match else f"pid file {job.spec.pid_file}"
        job.verdict = Verdict("unknown", job.first_seen, 0.0, "not-running", (f"no process matches {how}",), "")
        return
    verdict = infer_phase(observation(job, skew), now, job.verdict)
    if job.dump_finding is not None:
        verdict = annotate(verdict, job.dump_finding, ended=job.exit is not None)
    if job.verdict is None or verdict.phase != job.verdict.phase:
        job.history.append((verdict.phase, verdict.since))
        del job.history[:-MAX_HISTORY]
    job.verdict = verdict
    kept = job.judged
    if isinstance(kept, Judged) and kept.facts is not None and verdict.phase in PROGRESS_CONFIRMS:
        kept.lines = _log_lines(job, now)  # what a frame of progress lines only refreshes


def lead_process(procs: list[ProcInfo]) -> ProcInfo | None:
    """The process whose stdout matters: the first Python rank (not the launcher)."""
    if not procs:
        return None
    ranks = [p for p in procs if p.is_python and not launcher_kind(p)]
    return (ranks or procs)[0]

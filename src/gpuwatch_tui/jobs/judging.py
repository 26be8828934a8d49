"""Judging a job: follow its processes to their end, turn each frame into a resource sample, build
the phase engine's observation and record the verdict (with the phase history)."""

from __future__ import annotations

from functools import lru_cache

from ..model import ExitInfo, HostSample, ProcInfo
from ..probe.wire import COMPILER_NAMES  # the probe reports compilers by these names
from .ended_by import ended_by
from .job_actions import annotate
from .activity import COMPILE_WORKER_MARK
from .gpu_share import shared_reading
from .observation import ExitFacts, GpuReading, JobObservation, LogFacts, OutputFacts, ResourceSample
from .phase import infer_phase, log_phase_evidence
from .job_state import JobState, hint_phase, index_at, lead_process, quiet_limit
from .verdict import Verdict
from .verdict_reuse import PROGRESS_CONFIRMS, Judged, keep_log_lines, kept_log_lines, verdict_unchanged

WINDOW_S = 900.0  # resource samples kept per job (the engine looks back at most this far)
# Every sample of the last DENSE_S is kept (the engine's rates read the last RATE_WINDOW_S); older ones
# one per SPARSE_EVERY_S (what is read that far back: when the job was first seen, when its GPUs last
# computed). A full window at 1 Hz was ~700 bytes x 900 per job: 650 MB for 1024 jobs.
DENSE_S = 60.0
SPARSE_EVERY_S = 10.0
GONE_GRACE_SAMPLES = 2  # a watched pid missing this many frames in a row (without ExitInfo) is gone
MAX_HISTORY = 200


def track_members(job: JobState, procs: dict[int, ProcInfo], gone: dict, skew: float, now: float) -> None:
    """Notice members that went away; when all have, the job has ended (`job.exit`)."""
    missing = job.missing
    lost = False
    for pid, start in job.members.items():  # (not changed in the loop)
        p = procs.get(pid)
        if p is not None and abs(p.start_time - start) < 0.5 and p.state != "Z":
            if missing:
                missing.pop(pid, None)
            continue
        lost = True
        if p is not None and p.state == "Z" and pid not in job.exit_infos:
            # Exited, not yet reaped by its parent: as gone as it gets.
            job.exit_infos[pid] = ExitInfo(pid, start, now - skew)
        info = gone.get((pid, round(start, 2)))
        if info is None:
            info = next((g for (gp, _), g in gone.items() if gp == pid), None)
        if info is not None:
            job.exit_infos[pid] = info
        job.missing[pid] = job.missing.get(pid, 0) + 1
    if not lost and job.members:
        return  # every member there: alive (the usual frame)
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


def observe(job: JobState, sample: HostSample, on_gpu: dict[int, list[int]], skew: float, now: float,
            owners: dict[int, int] | None = None) -> None:
    """Record this frame's resource sample for `job`, then judge it (unless the frame may keep the
    verdict: `verdict_unchanged`). One pass over the job's processes: this runs for every job every frame.
    `owners`: pid -> job of the pids on GPUs more than one process holds (gpu_share.gpu_owners)."""
    frame_procs = sample.procs
    procs = []
    for pid, start in job.members.items():
        p = frame_procs.get(pid)
        if p is not None and abs(p.start_time - start) < 0.5:
            procs.append(p)
    if len(procs) > 1:
        root_pid = job.root[0] if job.root else None
        procs.sort(key=lambda p: (p.pid != root_pid, p.pid))  # root (launcher) first
    job.procs = procs  # an ended job lists none: its last facts would read as a live process
    if procs:
        job.last_procs = procs  # but the verdict on its end still needs them (stdout, -u)
    main = {procs[0].pid} if len(procs) == 1 else {p.pid for p in procs}
    children = {}
    named = None
    main_cpu = tree_cpu = 0
    for p in procs:  # (sums in the order of the procs: the same floats as summing each list)
        main_cpu += p.cpu_s
        if p.ppid not in main:  # a top of the tree: its descendants' time counts once
            tree_cpu += p.cpu_s + p.cpu_children_s
        for c in p.children:
            if c.pid not in main:
                children[c.pid] = c
        if p.compilers_seen:
            named = set(p.compilers_seen) if named is None else named | set(p.compilers_seen)
    workers = 0
    for c in children.values():
        if c.name in COMPILER_NAMES:
            named = {c.name} if named is None else named | {c.name}
        if _is_compile_worker(c.cmdline):
            workers += 1
    compilers = tuple(sorted(named)) if named else ()
    if compilers:
        job.compilers_at = now  # the last sample that showed one (read by `verdict_unchanged`)
    if workers and job.compile_worker_since is None:
        job.compile_worker_since = now
    # The job's GPUs from the frame's pid -> GPU map: every job of a host would otherwise scan every GPU.
    held = None
    for pid in main:
        on = on_gpu.get(pid)
        if on:
            held = set(on) if held is None else held.union(on)
    for pid in children:
        on = on_gpu.get(pid)
        if on:
            held = set(on) if held is None else held.union(on)
    gpus = []
    if held:
        frame_gpus = sample.gpus
        memo = _positional_memo
        if memo[1] if memo[0] is frame_gpus else _positional(frame_gpus):  # (asked once per frame)
            # A GPU's index is its position (the usual frame) and so no two share one: the GPU at a
            # held index is the one whose process list named a pid of the job (`on_gpu` was read from
            # those lists), so it is read as it is, without looking through its processes again.
            count = len(frame_gpus)
            for i in (held if len(held) == 1 else sorted(held)):
                if i < count:
                    g = frame_gpus[i]
                    r = GpuReading(i, g.util_pct, g.mem_used_mib, g.power_w, g.power_limit_w,
                                   g.sm_active_pct, g.tensor_active_pct, g.dram_active_pct)
                    gpus.append(r if len(g.processes) < 2 else shared_reading(r, g, main, children, owners))
        else:
            count = len(frame_gpus)
            found = (frame_gpus[i] for i in sorted(held)) if all(
                i < count and frame_gpus[i].index == i for i in held) else (g for g in frame_gpus if g.index in held)
            for g in found:
                if any(gp.pid in main or gp.pid in children for gp in g.processes):
                    r = GpuReading(g.index, g.util_pct, g.mem_used_mib, g.power_w, g.power_limit_w,
                                   g.sm_active_pct, g.tensor_active_pct, g.dram_active_pct)
                    gpus.append(r if len(g.processes) < 2 else shared_reading(r, g, main, children, owners))
        known = job.gpus
        for r in gpus:
            if r.index not in known:
                job.gpus = tuple(sorted({*known, *(r.index for r in gpus)}))
                break
    if procs:
        if len(procs) == 1:  # (one process: the tuples below without the generic loops)
            p = procs[0]
            states, rank_cpu, members = (p.state,), ((p.pid, p.cpu_s),), (p.pid,)
        else:
            states = tuple([p.state for p in procs])
            rank_cpu = tuple([(p.pid, p.cpu_s) for p in procs if p.pid in on_gpu])
            members = tuple(sorted(main))
        logs = job.logs
        if len(logs) == 1:
            for b in logs.values():
                log_bytes = b.total_bytes
        else:
            log_bytes = sum(b.total_bytes for b in logs.values())
        rs = ResourceSample(now, main_cpu, max(0.0, tree_cpu - main_cpu), tuple(gpus), states, compilers,
                            workers, rank_cpu, log_bytes, members)
        samples = job.samples
        samples.append(rs)
        while now - samples[0].time > WINDOW_S:
            samples.popleft()
        if samples[0].time < now - DENSE_S:  # (else all dense yet, a young job: nothing to thin)
            _thin(job, now)
    for buf in job.logs.values():
        buf.tick(now)
    interp = job.interp
    if interp is not None and job.cadence.note(interp.last_progress_at, interp.hint):
        job.judged = None  # the quiet limit moved: the kept verdict's clock bands were taken with the old one
    if not procs or not verdict_unchanged(job, now, skew):
        judge(job, now, skew)


# (the last frame's GPU list, whether its indices are positions): one tuple, replaced whole
_positional_memo: tuple = (None, False)


def _positional(gpus: list) -> bool:
    """Whether every GPU of the frame sits at the position its index says (then no two share an
    index). Asked for every job of a frame: answered once per frame's GPU list."""
    global _positional_memo
    memo = _positional_memo
    if memo[0] is not gpus:
        memo = _positional_memo = (gpus, all(g.index == i for i, g in enumerate(gpus)))
    return memo[1]


@lru_cache(maxsize=4096)
def _is_compile_worker(cmdline: tuple[str, ...]) -> bool:
    """An inductor compile worker (the same few children are asked about on every frame)."""
    return COMPILE_WORKER_MARK in " ".join(cmdline)


def _thin(job: JobState, now: float) -> None:
    """Samples that left the dense part since the last frame: drop each one closer than SPARSE_EVERY_S
    to the older sample kept before it. The oldest is always kept, and so are the last two."""
    samples = job.samples
    if samples[0].time >= now - DENSE_S:
        return  # all dense yet (a young job)
    n = len(samples)
    i = index_at(samples, now - DENSE_S, job.dense_back)  # the oldest dense sample
    job.dense_back = n - i
    last = min(i - 1, n - 3)  # the newest that may go
    k = max(index_at(samples, job.sparse_upto, job.sparse_back, after=True), 1)  # the oldest not looked at yet
    while k <= last:
        if samples[k].time - samples[k - 1].time < SPARSE_EVERY_S:
            del samples[k]
            last -= 1
        else:
            k += 1
    if last >= 0:
        job.sparse_upto = max(job.sparse_upto, samples[last].time)
        job.sparse_back = len(samples) - last  # where the next frame finds the sample after it (one more: the new one)


def observation(job: JobState, skew: float, time_now: float | None = None) -> JobObservation:
    """What the phase engine reads about `job`: its samples, log facts, stdout target, exit."""
    interp = job.interp
    logs = job.logs
    progress = interp.progress.current
    if len(logs) == 1:  # the usual case, without the generators below
        [(path, log)] = logs.items()
        last_growth, total, observed, size, mtime = log.last_growth, log.total_bytes, log.received, log.size, log.mtime
    else:
        path, log = next(iter(logs.items()), (None, None))
        last_growth = max((b.last_growth for b in logs.values() if b.last_growth is not None), default=None)
        total = sum(b.total_bytes for b in logs.values())
        observed = all(b.received for b in logs.values())
        size = (sum(b.size for b in logs.values())
                if logs and all(b.size is not None for b in logs.values()) else None)
        mtime = max((b.mtime for b in logs.values() if b.mtime is not None), default=None)
    facts = LogFacts(
        path, total, last_growth, interp.hint, interp.failure, len(interp.failures), interp.finished_at,
        progress if progress.updated_at is not None else None, interp.last_progress_at, interp.exit_code,
        interp.signal, dict(interp.phase_progress), interp.phase_progress_phase,
        log.error if log else None, observed, size, mtime, interp.finished_text, interp.finished_seq,
    )
    lead = lead_process(job.procs or job.last_procs)
    out = None
    if job.outdir is not None and job.outdir.exists:
        d = job.outdir
        out = OutputFacts(d.path, d.newest_mtime, d.newest_name, d.files, d.total_bytes)
    return JobObservation(
        samples=job.samples,  # read, never kept, by the engine: no copy of up to WINDOW_S samples
        stall_after_s=job.stall_after_s,
        quiet_limit_s=quiet_limit(job),
        rhythm_line=job.cadence.line(hint_phase(job), time_now) if time_now is not None else None,
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


def judge(job: JobState, now: float, skew: float, looked: bool = True) -> None:
    """The job's verdict now. `looked`: for a configured job with no process, whether its host's probe
    has looked for one yet (until then, none found says nothing)."""
    if not job.members and job.spec is not None and job.exit is None:
        if not job.first_seen:
            job.first_seen = now  # made from the config before any sample: looking since now
        how = f"cmdline /{job.spec.match}/" if job.spec.match else f"pid file {job.spec.pid_file}"
        if looked:
            job.verdict = Verdict("unknown", job.first_seen, 0.0, "not-running", (f"no process matches {how}",), "")
        else:  # the probe has not looked yet (its first frames come before it has the job's match)
            job.verdict = Verdict("unknown", job.first_seen, 0.0, "observing", (f"looking for a process: {how}",), "")
        return
    kept = job.judged
    if isinstance(kept, Judged) and kept.refresh:
        kept.refresh = False
        if kept.at == now and _refresh(job, kept, now):
            return
    verdict = infer_phase(observation(job, skew, now), now, job.verdict)
    if job.dump_finding is not None:
        verdict = annotate(verdict, job.dump_finding, ended=job.exit is not None)
    if job.verdict is None or verdict.phase != job.verdict.phase:
        job.history.append((verdict.phase, verdict.since))
        del job.history[:-MAX_HISTORY]
    job.verdict = verdict
    kept = job.judged
    if isinstance(kept, Judged) and kept.facts is not None and verdict.phase in PROGRESS_CONFIRMS:
        keep_log_lines(job, kept, kept_log_lines(job, now), now)  # what a frame of progress lines only refreshes


def _refresh(job: JobState, kept: Judged, now: float) -> bool:
    """Judge again a training verdict the log announced, judged last at most a few seconds ago, on a
    frame whose every fact the engine decides on is where it was then (`verdict_unchanged`: the readings in
    their bands, the same CPU class, log facts and process facts, no clock past a threshold, no
    hysteresis count under way, no GPU that could spin): the engine would take the same rule to the
    same phase, detail, since, confidence, advice and memory, so only the evidence values are made
    again (`log_phase_evidence`). False where that does not hold: judged in full."""
    v = job.verdict
    hint = job.interp.hint
    if (v is None or v.phase != "training" or hint is None or hint.phase != "training" or job.exit is not None
            or job.dump_finding is not None or not job.members):
        return False
    lines = kept_log_lines(job, now)
    if lines[1] is None:  # no log growth seen: `_active` writes another line there
        return False
    evidence = log_phase_evidence(lines, job.samples, now, v.memory.since_note)
    job.verdict = Verdict(v.phase, v.since, v.confidence, v.detail, evidence, v.advice, v.actions, v.memory)
    keep_log_lines(job, kept, lines, now)
    return True

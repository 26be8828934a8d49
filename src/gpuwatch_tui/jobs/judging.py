"""Judging a job: follow its processes to their end, turn each frame into a resource sample, build
the phase engine's observation and record the verdict (with the phase history)."""

from __future__ import annotations

from ..model import ExitInfo, HostSample, ProcInfo
from .discovery import launcher_kind
from .ended_by import ended_by
from .job_actions import annotate
from .job_state import JobState
from .phase import (
    COMPILE_WORKER_MARK,
    COMPILER_NAMES,
    ExitFacts,
    GpuReading,
    JobObservation,
    LogFacts,
    OutputFacts,
    ResourceSample,
    Verdict,
    infer_phase,
)

WINDOW_S = 900.0  # resource samples kept per job (the engine looks back at most this far)
GONE_GRACE_SAMPLES = 2  # a watched pid missing this many frames in a row (without ExitInfo) is gone
MAX_HISTORY = 200


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
    procs = [sample.procs[pid] for pid in job.members if pid in sample.procs
             and abs(sample.procs[pid].start_time - job.members[pid]) < 0.5]
    root_pid = job.root[0] if job.root else None
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
    for g in sample.gpus:
        if any(gp.pid in job_pids for gp in g.processes):
            gpus.append(GpuReading(g.index, g.util_pct, g.mem_used_mib, g.power_w, g.power_limit_w))
            gpu_indices.add(g.index)
    job.gpus = tuple(sorted(gpu_indices))
    compilers = tuple(sorted({c.name for c in children.values() if c.name in COMPILER_NAMES}
                             | {n for p in procs for n in p.compilers_seen}))
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
    for buf in job.logs.values():
        buf.tick(now)
    judge(job, now, skew)


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
        samples=list(job.samples),
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


def lead_process(procs: list[ProcInfo]) -> ProcInfo | None:
    """The process whose stdout matters: the first Python rank (not the launcher)."""
    if not procs:
        return None
    ranks = [p for p in procs if p.is_python and not launcher_kind(p)]
    return (ranks or procs)[0]

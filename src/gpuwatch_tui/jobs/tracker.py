"""JobTracker: the stateful side of the job code, driven by the host sessions.

The host session calls, for every probe frame:

    tracker.update(host, sample, now)      # feed the frame
    wants = tracker.wanted(host)           # then send these to the probe (pids, tails, dirs, matches)

and readers call `jobs()`, `to_json(now)`, `log_lines(job_id)`, `dismiss(job_id)`.
Everything here is plain Python driven by the caller's clock; nothing does I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field

from ..model import DirStat, ExitInfo, HostSample, ProcInfo, TailChunk
from ..vocab import DEFAULT_STALL_AFTER_S
from .discovery import (
    configured_groups,
    discover,
    gpu_pids_of,
    is_python,
    launcher_kind,
    log_paths,
    output_dir_from_cmdline,
    parents_to_watch,
)
from .interpret import LogInterpreter
from .logtail import LogBuffer
from .match_check import note_broad_matches
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
    format_history,
    infer_phase,
)
from .progress import ProgressTracker
from .rules import Rule, RuleSet
from .settings import JobSettings, JobSpec

WINDOW_S = 900.0  # resource samples kept per job (the engine looks back at most this far)
GONE_GRACE_SAMPLES = 2  # a watched pid missing this many frames in a row (without ExitInfo) is gone
TAIL_AFTER_EXIT_S = 30.0  # keep reading the log after exit: buffered stdout is flushed at exit
MAX_HISTORY = 200
# A new GPU process whose parent the probe has not reported yet (it reports only the pids it is asked
# for) is held back this many frames while its parent chain is fetched: the ranks of a torchrun job
# are then published as one job from the start, not one job per rank merged a frame later.
HOLD_NEW_FRAMES = 2


@dataclass(frozen=True)
class ProbeWants:
    """What the host session should ask its probe for, for this tracker's jobs."""

    pids: list[int] = field(default_factory=list)
    tails: dict[str, str] = field(default_factory=dict)  # key -> path
    dirs: dict[str, str] = field(default_factory=dict)  # key -> path
    matches: dict[str, dict] = field(default_factory=dict)  # key -> {"regex": str|None, "pid_file": str|None}


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
    gpu_pids: set[int] = field(default_factory=set)
    gpus: tuple[int, ...] = ()
    logs: dict[str, LogBuffer] = field(default_factory=dict)  # path -> buffer, primary first
    interp: LogInterpreter | None = None
    samples: deque = field(default_factory=deque)
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
    first_seen: float = 0.0
    last_seen: float = 0.0
    stall_after_s: float = DEFAULT_STALL_AFTER_S

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

    def to_json(self, now: float | None = None) -> dict:
        v = self.verdict
        progress = self.interp.progress.current.to_json() if self.interp else {}
        code = self.exit.exit_code if self.exit else None
        if code is None and self.exit is not None and self.interp is not None:
            code = self.interp.exit_code  # as torchrun reported it
        log = self.primary_log
        return {
            "id": self.id,
            "name": self.name,
            "host": self.host,
            "pids": self.pids,
            "gpus": list(self.gpus),
            "phase": v.phase if v else "unknown",
            "detail": v.detail if v else None,
            "since": v.since if v else self.first_seen,
            "confidence": round(v.confidence, 2) if v else 0.0,
            "evidence": list(v.evidence) if v else [],
            "advice": v.advice if v else "",
            "actions": list(v.actions) if v else [],  # registry names: the UI shows keys, the CLI verbs
            "log": next(iter(self.logs), None),
            "logs": list(self.logs),
            "exit_code": code,
            "exit_signal": self.exit.signal if self.exit else None,
            "progress": progress,
            "history": [{"phase": p, "since": s} for p, s in self.history],
            "configured": self.spec is not None,
            "launcher": self.launcher,
            "alive": self.alive,
            "ended_at": self.exit.ended_at if self.exit else None,
            "output_dir": self.output_dir,
            "log_lines": log.total_lines if log else 0,
            "stall_after_s": self.stall_after_s,
            "progress_history": [
                {"time": p.time, "step": p.step, "total": p.total, "loss": _finite(p.loss), "epoch": p.epoch}
                for p in list(self.interp.progress.history)[-100:]
            ] if self.interp else [],
            "history_text": self.history_text(now if now is not None else self.last_seen),
        }


class JobTracker:
    def __init__(self, settings: JobSettings | None = None, user_rules: list[Rule] | tuple[Rule, ...] = ()):
        self.settings = settings or JobSettings()
        self.rules = RuleSet.with_user_rules([*user_rules, *self.settings.rules])
        self._jobs: dict[str, JobState] = {}
        self._serial = 0
        self._tail_keys: dict[str, tuple[str, str]] = {}  # tail key -> (job id, path)
        self._parents: dict[str, set[int]] = {}  # host -> parent pids discovery wants next
        self._dismissed: set[tuple[str, int, float]] = set()
        self._specs = {f"cfg{i}": spec for i, spec in enumerate(self.settings.jobs)}
        self._match_reported: set[tuple[str, str]] = set()  # (host, spec key) the probe has scanned for
        self._held: dict[tuple[str, int, float], int] = {}  # (host, gpu pid, start) -> frames held back
        self._holding: set[str] = set()  # hosts with a new job held back this frame
        for key, spec in self._specs.items():
            self._new_job(spec.host, spec.name, key, spec=spec, now=0.0)

    # ------------------------------------------------------------------ reading
    def jobs(self, host: str | None = None) -> list[JobState]:
        return [j for j in self._jobs.values() if host is None or j.host == host]

    def job(self, job_id: str) -> JobState | None:
        return self._jobs.get(job_id)

    def to_json(self, now: float | None = None) -> list[dict]:
        return [j.to_json(now) for j in self._jobs.values()]

    def log_lines(self, job_id: str, n: int | None = None) -> list[str]:
        job = self._jobs.get(job_id)
        log = job.primary_log if job else None
        if log is None:
            return []
        lines = log.lines(n)
        if log.live and (not lines or lines[-1] != log.live):
            lines.append(log.live)  # the bar as it is now
        return lines

    def log_total(self, job_id: str) -> int:
        job = self._jobs.get(job_id)
        log = job.primary_log if job else None
        return log.total_lines if log else 0

    def procs(self, job_id: str) -> list[ProcInfo]:
        job = self._jobs.get(job_id)
        return list(job.procs) if job else []

    def outdir(self, job_id: str) -> DirStat | None:
        job = self._jobs.get(job_id)
        return job.outdir if job else None

    def ready(self, host: str) -> bool:
        """Whether every live job on `host` has been observed enough to judge: each of its logs read
        at least once by the probe and two resource samples (a CPU rate). Until then a job's verdict
        is `starting` / `unknown (observing)`; one-shot readers (`gpuwatch status`) wait for this."""
        if any(spec.host == host and (host, key) not in self._match_reported for key, spec in self._specs.items()):
            return False  # the probe has not scanned for a configured job's processes yet
        if host in self._holding:
            return False  # a new job waits for its parent chain
        for job in self.jobs(host):
            if not job.alive:
                continue
            if len(job.samples) < 2 or not all(b.received for b in job.logs.values()):
                return False
        return True

    # The names the dashboard's MonitorSource asks for.
    def job_log(self, job_id: str) -> list[str]:
        return self.log_lines(job_id)

    def job_log_total(self, job_id: str) -> int:
        return self.log_total(job_id)

    def job_procs(self, job_id: str) -> list[ProcInfo]:
        return self.procs(job_id)

    def job_outdir(self, job_id: str) -> DirStat | None:
        return self.outdir(job_id)

    def dismiss(self, job_id: str) -> bool:
        """Forget a job. A live discovered job stays hidden; a configured job starts over."""
        job = self._jobs.pop(job_id, None)
        if job is None:
            return False
        for key in [k for k, (jid, _) in self._tail_keys.items() if jid == job_id]:
            del self._tail_keys[key]
        extra = job.spec is not None and "#" in job.id  # a second (third...) tree of a configured job
        if job.root is not None and (job.spec is None or (extra and job.exit is None)):
            self._dismissed.add((job.host, *job.root))
        if job.spec is not None and not extra:
            self._new_job(job.spec.host, job.spec.name, job.id, spec=job.spec, now=job.last_seen)
        return True

    # ------------------------------------------------------------------ what to ask the probe
    def wanted(self, host: str) -> ProbeWants:
        pids: set[int] = set(self._parents.get(host, ()))
        tails: dict[str, str] = {}
        dirs: dict[str, str] = {}
        matches: dict[str, dict] = {}
        for key, spec in self._specs.items():
            if spec.host == host:
                matches[key] = {"regex": spec.match, "pid_file": spec.pid_file}
        for job in self.jobs(host):
            if job.alive:
                pids.update(job.members)
            recently_ended = job.exit is not None and job.last_seen - job.exit.ended_at < TAIL_AFTER_EXIT_S
            if job.alive or recently_ended:
                for key, (jid, path) in self._tail_keys.items():
                    if jid == job.id:
                        tails[key] = path
                if job.output_dir:
                    dirs[f"j{job.serial}.out"] = job.output_dir
        return ProbeWants(sorted(pids), tails, dirs, matches)

    # ------------------------------------------------------------------ feeding
    def update(self, host: str, sample: HostSample, now: float) -> None:
        # Host timestamps (start times, mtimes) are moved onto the local clock.
        skew = now - sample.time
        procs = sample.procs
        gone = {(g.pid, round(g.start_time, 2)): g for g in sample.gone}
        for job in self.jobs(host):
            job.last_seen = now
        self._feed_tails(sample.tails, skew, now)
        self._feed_dirs(host, sample.dirs, skew)

        self._match_reported.update((host, key) for key in sample.matches)
        claimed = self._update_configured(host, sample, now)
        self._update_discovered(host, sample, claimed, now)
        on_gpu = gpu_pids_of(sample.gpus)
        for job in self.jobs(host):
            if job.exit is None and job.members:
                self._track_members(job, procs, gone, skew, now)
            if job.members or job.exit is not None:
                self._observe(job, sample, on_gpu, skew, now)
            elif job.spec is not None:
                self._judge(job, now, skew)
        note_broad_matches(self.jobs(host), self._specs, sample)  # a `match` that takes pid 1 or others' sessions
        self._parents[host] = parents_to_watch(procs, on_gpu)

    def _new_job(self, host: str, name: str, job_id: str, now: float, spec: JobSpec | None = None) -> JobState:
        self._serial += 1
        stall = self.settings.stall_after_for(spec)
        job = JobState(job_id, host, name, self._serial, spec=spec, first_seen=now, last_seen=now,
                       stall_after_s=stall, interp=LogInterpreter(self.rules, ProgressTracker()))
        if spec is not None:
            job.output_dir = spec.output_dir
        self._jobs[job_id] = job
        return job

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
            trees = [t for t in configured_groups(live, procs)
                     if (host, t[0], procs[t[0]].start_time) not in self._dismissed]
            if not trees:
                continue
            slots = sorted((j for j in self.jobs(host) if j.spec is spec), key=lambda j: _instance(j.id, key))
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
                if job is None:
                    used = {_instance(j.id, key) for j in slots}
                    n = next(i for i in range(2, len(used) + 3) if i not in used)
                    job = self._new_job(host, spec.name, f"{key}#{n}", spec=spec, now=now)
                    job.name = f"{spec.name}#{n}"
                    slots.append(job)
                elif job.exit is not None:
                    # A new run of a configured job: start a fresh record, keep the phase history.
                    history, name = job.history, job.name
                    self._jobs.pop(job.id)
                    for k in [k for k, (jid, _) in self._tail_keys.items() if jid == job.id]:
                        del self._tail_keys[k]
                    slots.remove(job)
                    job = self._new_job(host, spec.name, job.id, spec=spec, now=now)
                    job.history, job.name = history, name
                    slots.append(job)
                taken.add(job.id)
                self._join_configured(job, root, main, procs)
        return claimed

    def _join_configured(self, job: JobState, root: int, main: list[int], procs: dict[int, ProcInfo]) -> None:
        if job.root is None:
            job.root = (root, procs[root].start_time)
        for pid in main:
            job.members.setdefault(pid, procs[pid].start_time)
        self._attach_logs(job, [procs[p] for p in main], job.spec.logs if job.spec else ())

    def _update_discovered(self, host: str, sample: HostSample, claimed: set[int], now: float) -> None:
        procs = sample.procs
        self._holding.discard(host)
        for key in [k for k in self._held if k[0] == host and k[1] not in procs]:
            del self._held[key]
        for group in discover(procs, sample.gpus, claimed):
            if (host, group.root, group.root_start) in self._dismissed:
                continue
            keys = {(pid, procs[pid].start_time) for pid in group.main}
            job = None
            for j in self.jobs(host):
                if j.spec is None and j.exit is None and any(
                    j.members.get(pid) == start for pid, start in keys
                ):
                    job = j
                    break
            if job is None and _parent_unknown(procs[group.root], procs):
                held = [(host, pid, procs[pid].start_time) for pid in group.gpu_pids]
                frames = max(self._held.get(k, 0) for k in held)
                if frames < HOLD_NEW_FRAMES:
                    for k in held:
                        self._held[k] = frames + 1
                    self._holding.add(host)
                    continue
            if job is None:
                job_id = f"{host}:{group.root}:{int(group.root_start)}"
                job = self._jobs.get(job_id) or self._new_job(host, group.name, job_id, now=now)
            # The launcher may show up a frame after its ranks: the root moves up, the id stays.
            job.root = (group.root, group.root_start)
            job.name = group.name
            job.launcher = group.launcher or job.launcher
            for pid, start in keys:
                job.members.setdefault(pid, start)
            job.gpu_pids.update(group.gpu_pids)
            self._attach_logs(job, [procs[p] for p in group.main], ())
            if job.output_dir is None:
                for pid in group.main:
                    found = output_dir_from_cmdline(procs[pid].cmdline, procs[pid].cwd)
                    if found:
                        job.output_dir = found
                        break
        # Jobs whose root moved up may now share processes: merge each into the older one.
        live = sorted((j for j in self.jobs(host) if j.spec is None and j.exit is None), key=lambda j: j.first_seen)
        for i, older in enumerate(live):
            if older.id not in self._jobs:
                continue
            for newer in live[i + 1 :]:
                if newer.id in self._jobs and any(older.members.get(p) == st for p, st in newer.members.items()):
                    for pid, start in newer.members.items():
                        older.members.setdefault(pid, start)
                    older.gpu_pids.update(newer.gpu_pids)
                    self.dismiss(newer.id)
                    if newer.root is not None:
                        self._dismissed.discard((host, *newer.root))

    def _attach_logs(self, job: JobState, procs: list[ProcInfo], configured: tuple[str, ...]) -> None:
        paths: list[str] = []
        cwd = next((p.cwd for p in procs if p.cwd), None)
        for path in configured:
            if not path.startswith("/") and cwd:
                path = f"{cwd.rstrip('/')}/{path}"
            paths.append(path)
        if not configured:
            paths.extend(log_paths(procs))
        for path in paths:
            if path not in job.logs and len(job.logs) < 4:
                job.logs[path] = LogBuffer(self.settings.tail_lines, self.settings.max_line_chars,
                                           self.settings.partial_stale_s)
                self._tail_keys[f"j{job.serial}.log{len(job.logs) - 1}"] = (job.id, path)
        if procs and job.started_at is None:
            job.started_at = min(p.start_time for p in procs)

    def _feed_tails(self, chunks: list[TailChunk], skew: float, now: float) -> None:
        for chunk in chunks:
            ref = self._tail_keys.get(chunk.key)
            if ref is None:
                continue
            job = self._jobs.get(ref[0])
            if job is None or ref[1] not in job.logs:
                continue
            if chunk.mtime is not None:
                chunk = dataclasses.replace(chunk, mtime=chunk.mtime + skew)
            buf = job.logs[ref[1]]
            buf.feed(chunk, now)
            buf.tick(now)
            for line in buf.take_new():
                job.interp.feed_line(line.text, now)
            if buf.live:
                job.interp.feed_live(buf.live, now)

    def _feed_dirs(self, host: str, dirs: list[DirStat], skew: float) -> None:
        by_key = {f"j{j.serial}.out": j for j in self.jobs(host)}
        for d in dirs:
            job = by_key.get(d.key)
            if job is not None:
                mtime = d.newest_mtime + skew if d.newest_mtime is not None else None
                job.outdir = dataclasses.replace(d, newest_mtime=mtime)

    def _track_members(self, job: JobState, procs: dict[int, ProcInfo], gone: dict, skew: float,
                       now: float) -> None:
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

    def _observe(self, job: JobState, sample: HostSample, on_gpu: dict[int, list[int]], skew: float,
                 now: float) -> None:
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
        compilers = tuple(sorted({c.name for c in children.values() if c.name in COMPILER_NAMES}))
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
        self._judge(job, now, skew)

    def _judge(self, job: JobState, now: float, skew: float) -> None:
        interp = job.interp
        log = job.primary_log
        last_growth = max((b.last_growth for b in job.logs.values() if b.last_growth is not None), default=None)
        failure = interp.failure
        facts = LogFacts(
            path=next(iter(job.logs), None),
            total_bytes=sum(b.total_bytes for b in job.logs.values()),
            last_growth_at=last_growth,
            hint=interp.hint,
            failure=failure,
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
        lead = _lead_process(job.procs or job.last_procs)
        out = None
        if job.outdir is not None and job.outdir.exists:
            d = job.outdir
            out = OutputFacts(d.path, d.newest_mtime, d.newest_name, d.files, d.total_bytes)
        obs = JobObservation(
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
        )
        if not job.members and job.spec is not None and job.exit is None:
            if not job.first_seen:
                job.first_seen = now  # made from the config before any sample: looking since now
            how = f"cmdline /{job.spec.match}/" if job.spec.match else f"pid file {job.spec.pid_file}"
            job.verdict = Verdict("unknown", job.first_seen, 0.0, "not-running",
                                  (f"no process matches {how}",), "")
            return
        verdict = infer_phase(obs, now, job.verdict)
        if job.verdict is None or verdict.phase != job.verdict.phase:
            job.history.append((verdict.phase, verdict.since))
            del job.history[:-MAX_HISTORY]
        job.verdict = verdict


def _parent_unknown(root: ProcInfo, procs: dict[int, ProcInfo]) -> bool:
    """Whether the chain above a new job's top process may go on (a launcher above the ranks) but the
    probe has not reported the parent yet (it is asked for it through `parents_to_watch`)."""
    return root.ppid > 1 and root.ppid not in procs and (is_python(root) or launcher_kind(root) is not None)


def _instance(job_id: str, key: str) -> int:
    """1 for a configured job's first tree (id `cfgN`), n for `cfgN#n`."""
    if job_id == key:
        return 1
    try:
        return int(job_id.rsplit("#", 1)[1])
    except (IndexError, ValueError):
        return 1_000_000


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _lead_process(procs: list[ProcInfo]) -> ProcInfo | None:
    """The process whose stdout matters: the first Python rank (not the launcher)."""
    if not procs:
        return None
    ranks = [p for p in procs if p.is_python and not launcher_kind(p)]
    return (ranks or procs)[0]


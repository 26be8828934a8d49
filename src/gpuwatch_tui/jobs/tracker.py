"""JobTracker: the stateful side of the job code, driven by the host sessions.

The host session calls, for every probe frame:

    tracker.update(host, sample, now)      # feed the frame
    wants = tracker.wanted(host)           # then send these to the probe (pids, tails, dirs, matches)

and readers call `views(now)` (typed JobViews), `to_json(now)`, `log_lines(job_id)`, `log_total`,
`procs`, `outdir`, `dismiss(job_id)`. Everything here is plain Python driven by the caller's clock;
nothing does I/O. The work is split by concern: grouping.py (which processes are which job),
log_wiring.py (logs and output dirs), judging.py (the phase engine), export.py (the views).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..model import DirStat, HostSample, ProcInfo
from ..views import JobView
from .boundary import TrainingEvidence
from .discovery import gpu_pids_of, parents_to_watch
from .match_check import note_broad_matches
from .multinode import MultiNodeJobs, run_facts
from .export import current_view, current_views
from .grouping import JobGrouping, Successor
from .grouping_reuse import frame_key, jobs_key
from .gpu_share import gpu_owners
from .interpret import LogInterpreter
from .host_actions import note_jobs
from .job_actions import RUN_STARTED, ActionRecord, DumpFinding, RESTART
from .job_state import JobState
from .judging import judge, observe, track_members
from .leftovers import follow as follow_leftovers, held_by_leftovers, note
from .observation import ExitFacts
from .log_wiring import LogWiring, feed_dirs, log_lines, outdir_key
from .progress import ProgressTracker
from .rules import Rule, RuleSet
from .settings import JobSettings, JobSpec
from ..short_id import give_short_ids

TAIL_AFTER_EXIT_S = 30.0  # keep reading the log after exit: buffered stdout is flushed at exit
SUCCESSOR_WAIT_S = 120.0  # a restart's new run is adopted by the old job if it shows up this soon


@dataclass(frozen=True)
class ProbeWants:
    """What the host session should ask its probe for, for this tracker's jobs."""

    pids: list[int] = field(default_factory=list)
    tails: dict[str, str] = field(default_factory=dict)  # key -> path
    dirs: dict[str, str] = field(default_factory=dict)  # key -> path
    matches: dict[str, dict] = field(default_factory=dict)  # key -> {"regex": str|None, "pid_file": str|None}


class JobTracker:
    def __init__(self, settings: JobSettings | None = None, user_rules: list[Rule] | tuple[Rule, ...] = ()):
        self.settings = settings or JobSettings()
        self.rules = RuleSet.with_user_rules([*user_rules, *self.settings.rules])
        self._jobs: dict[str, JobState] = {}
        self._by_host: dict[str, dict[str, JobState]] = {}  # host -> its jobs: every frame reads one host
        self._serial = 0
        self._parents: dict[str, set[int]] = {}  # host -> parent pids discovery wants next
        self._specs = {f"cfg{i}": spec for i, spec in enumerate(self.settings.jobs)}
        self._match_reported: set[tuple[str, str]] = set()  # (host, spec key) the probe has scanned for
        self._wiring = LogWiring(self.settings)
        # job id -> (pid, start ticks, facts, local time read): the top process's restart facts
        self._captures: dict[str, tuple[int, int, dict, float]] = {}
        self._grouped: dict[str, tuple] = {}  # host -> (frame_key, jobs_key) right after its last grouping
        # host -> (frame_key, parents_to_watch) of its latest frame: a frame that grouping would read the
        # same way asks for the same parents (parents_to_watch reads nothing else of it)
        self._parents_of_frame: dict[str, tuple] = {}
        # host -> a count bumped whenever what `wanted` reads of the tracker may have changed other than
        # through the jobs' ends (grouping ran, a job record came or went, a spec or successor was added)
        self._wants_stamp: dict[str, int] = {}
        self._wanted: dict[str, tuple] = {}  # host -> (stamp, parents, job ends, ProbeWants) last built
        self._last_frame: dict[str, tuple] = {}  # host -> (frame_key, wants stamp) after its latest frame
        self._gpus: dict[str, tuple] = {}  # host -> its GPUs in the latest frame (ranks' GPUs, multinode.py)
        self.multinode = MultiNodeJobs()  # per-host jobs of one run on several hosts read as one job
        self._notes: dict[str, list] = {}  # host -> its action records still waiting for their job
        self._grouping = JobGrouping(self._jobs, self._specs, self._wiring, self._new_job, self._drop,
                                     on_host=self.states)
        for key, spec in self._specs.items():
            self._new_job(spec.host, spec.name, key, spec=spec, now=0.0)

    def add_spec(self, spec: JobSpec, now: float = 0.0) -> str:
        """Watch one more configured job from now on (a Slurm job that started); returns its key."""
        key = f"cfg{len(self._specs)}"
        while key in self._specs:
            key += "+"
        self._specs[key] = spec  # the same dict the grouping reads
        self._new_job(spec.host, spec.name, key, spec=spec, now=now)  # (bumps the host's wants stamp)
        return key

    # ------------------------------------------------------------------ reading
    def views(self, now: float | None = None, joined: bool = True) -> list[JobView]:
        """Every job as a frozen view; `now` dates the phase history text (default: last frame).
        A run over several hosts is one view (multinode.py); `joined=False` gives its per-host parts."""
        jobs = self._jobs.values()
        if not joined:
            return [current_view(j, now) for j in jobs]
        # each job's run facts gathered in the same pass as its view, while its record is at hand
        views, facts = current_views(jobs, now, run_facts)
        return self.multinode.join(views, self, now, facts)

    def host_gpus(self, host: str) -> tuple:
        return self._gpus.get(host, ())

    def to_json(self, now: float | None = None) -> list[dict]:
        return [view.to_json() for view in self.views(now)]

    def states(self, host: str | None = None) -> list[JobState]:
        """The mutable records (for the tracker's own parts and tests; readers use `views`)."""
        if host is None:
            return list(self._jobs.values())
        return list(self._by_host.get(host, {}).values())

    def state(self, job_id: str) -> JobState | None:
        return self._jobs.get(job_id)

    def _record(self, job_id: str) -> JobState | None:
        """A job's record; for a multi-node job, its lead part's (rank 0's host: the log people read)."""
        job = self._jobs.get(job_id)
        if job is None:
            parts = self.multinode.parts_of(job_id)
            job = self._jobs.get(parts[0]) if parts else None
        return job

    def log_lines(self, job_id: str, n: int | None = None) -> list[str]:
        job = self._record(job_id)
        return log_lines(job, n) if job else []

    def log_total(self, job_id: str) -> int:
        job = self._record(job_id)
        log = job.primary_log if job else None
        return log.total_lines if log else 0

    def procs(self, job_id: str) -> list[ProcInfo]:
        job = self._record(job_id)
        return list(job.procs) if job else []

    def outdir(self, job_id: str) -> DirStat | None:
        job = self._record(job_id)
        return job.outdir if job else None

    def ready(self, host: str) -> bool:
        """Whether every live job on `host` has been observed enough to judge: each of its logs read
        at least once by the probe and two resource samples (a CPU rate). Until then a job's verdict
        is `starting` / `unknown (observing)`; one-shot readers (`gpuwatch status`) wait for this."""
        if any(spec.host == host and (host, key) not in self._match_reported for key, spec in self._specs.items()):
            return False  # the probe has not scanned for a configured job's processes yet
        if host in self._grouping.holding:
            return False  # a new job waits for its parent chain
        for job in self.states(host):
            if not job.alive:
                continue
            if len(job.samples) < 2 or not all(b.received for b in job.logs.values()):
                return False
        return True

    def dismiss(self, job_id: str) -> bool:
        """Forget a job. A live discovered job stays hidden; a configured job starts over."""
        parts = self.multinode.parts_of(job_id)
        if parts and job_id not in self._jobs:  # a multi-node job: all of its per-host parts
            return all([self.dismiss(part) for part in parts])
        job = self._jobs.get(job_id)
        if job is None:
            return False
        self._drop(job_id)
        extra = job.spec is not None and "#" in job.id  # a second (third...) tree of a configured job
        if job.root is not None and (job.spec is None or (extra and job.exit is None)):
            self._grouping.dismissed.add((job.host, *job.root))
        if job.spec is not None and not extra:
            self._new_job(job.spec.host, job.spec.name, job.id, spec=job.spec, now=job.last_seen)
        return True

    # ------------------------------------------------------------------ what gpuwatch did to a job
    def record_action(self, job_id: str, action: str, user: str, when: float,
                      status_file: str | None = None, ref: str | None = None) -> ActionRecord:
        """Note on the job that `user` took `action` at `when` (local time): a kill makes the run end as
        crashed/killed with who and when; a restart's `status_file` gives the next run its exit status.
        `ref`: the id of the record the action left on the host (read back from there, it is this one)."""
        parts = self.multinode.parts_of(job_id)
        if parts and job_id not in self._jobs:  # a multi-node job: the action is on every part
            return [self.record_action(part, action, user, when, status_file, ref) for part in parts][0]
        job = self._jobs.get(job_id)
        if job is None:
            raise KeyError(f"no job {job_id!r}")
        record = ActionRecord(action, user, when, job.serial, status_file, ref)
        job.actions.append(record)
        job.revision += 1  # its view (events) changes now, not at the host's next frame
        return record

    def set_restart_status_file(self, job_id: str, record: ActionRecord, status_file: str) -> None:
        """A restart's new run was started: where its wrapper writes the exit status."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        for i, r in enumerate(job.actions):
            if r is record:
                job.actions[i] = dataclasses.replace(record, status_file=status_file)

    def expect_successor(self, job_id: str, host: str, pid: int, start_ticks: int, wrapper_pid: int | None,
                         now: float, within_s: float = SUCCESSOR_WAIT_S) -> None:
        """A restart of `job_id` started pid (start ticks, under the wrapper `wrapper_pid`): when that
        process shows up it is the same job (id, name, history kept, the restart in its events), not a new
        discovered job; for a configured job it stands in for a match the probe may have missed (a command
        line read between the wrapper's fork and the run's exec)."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        pending = self._grouping.successors.setdefault(host, [])
        pending[:] = [s for s in pending if s.job_id != job_id]
        pending.append(Successor(job_id, int(pid), int(start_ticks), wrapper_pid, now + within_s))
        self._touch(host)

    def note_leftovers(self, job_id: str, refs: list[tuple[int, int]]) -> None:
        """Processes (pid, start ticks) an action on the job left behind: followed as its leftovers once its
        top process is gone (the engine may never have seen them: forked while the job was being killed)."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        note(job, refs)
        self._touch(job.host)

    def record_dump(self, job_id: str, finding: DumpFinding) -> None:
        """The latest py-spy dump's reading joins the job's evidence (see job_actions.annotate)."""
        job = self._jobs.get(job_id)
        if job is not None:
            job.dump_finding = finding  # the next frame's verdict carries it

    def pending_exit_status(self, host: str) -> list[tuple[str, str]]:
        """(job id, status file) of ended runs that a restart started under the wrapper, whose real
        exit status has not been read yet: the caller asks the host (`run_status`) and reports it."""
        out = []
        for job in self.states(host):
            if job.exit is None or job.exit_status_known:
                continue
            # This gpuwatch's restart (recorded on the run it replaced), or the host's record of the run.
            started_by = next((r for r in reversed(job.actions) if r.status_file and (
                (r.action == RESTART and r.run < job.serial) or (r.action == RUN_STARTED and r.run == job.serial))),
                None)
            if started_by is not None:
                out.append((job.id, started_by.status_file))
        return out

    def set_exit_status(self, job_id: str, exit_code: int | None, exit_signal: int | None) -> None:
        """The real exit status of an ended run (from the wrapper's record): judge its end again."""
        job = self._jobs.get(job_id)
        if job is None or job.exit is None:
            return
        job.exit = ExitFacts(job.exit.ended_at, exit_code, exit_signal)
        job.exit_status_known = True
        judge(job, job.last_seen, 0.0)

    def set_capture(self, job_id: str, pid: int, start_ticks: int, facts: dict, when: float) -> None:
        """The restart facts of the job's top process (argv, cwd, environ, outputs) as read at `when`."""
        if job_id in self._jobs:
            self._captures[job_id] = (pid, start_ticks, facts, when)

    def capture(self, job_id: str) -> tuple[int, int, dict, float] | None:
        """(pid, start ticks, facts, when read) of the job's top process, if captured."""
        return self._captures.get(job_id)

    # ------------------------------------------------------------------ what to ask the probe
    def wanted(self, host: str) -> ProbeWants:
        """What the host's probe should report for this tracker. The same object as last time while
        nothing it is made of changed (the host session then has nothing to send)."""
        parents = self._parents.get(host)
        ends = tuple([(job.exit is None, job.exit is not None and job.last_seen - job.exit.ended_at < TAIL_AFTER_EXIT_S)
                      for job in self._by_host.get(host, {}).values()])
        stamp = self._wants_stamp.get(host, 0)
        last = self._wanted.get(host)
        if last is not None and last[0] == stamp and last[1] is parents and last[2] == ends:
            return last[3]
        wants = self._build_wants(host)
        self._wanted[host] = (stamp, parents, ends, wants)
        return wants

    def _build_wants(self, host: str) -> ProbeWants:
        pids: set[int] = set(self._parents.get(host, ()))
        pids.update(s.pid for s in self._grouping.successors.get(host, ()))  # a restart's new run
        tails: dict[str, str] = {}
        dirs: dict[str, str] = {}
        matches: dict[str, dict] = {}
        for key, spec in self._specs.items():
            if spec.host == host:
                matches[key] = {"regex": spec.match, "pid_file": spec.pid_file}
        for job in self.states(host):
            if job.alive:
                pids.update(job.members)
            if job.leftovers is not None:
                pids.update(job.leftovers.follow_pids())
            recently_ended = job.exit is not None and job.last_seen - job.exit.ended_at < TAIL_AFTER_EXIT_S
            if job.alive or recently_ended:
                tails.update(self._wiring.tails_of(job.id))
                if job.output_dir:
                    dirs[outdir_key(job)] = job.output_dir
        return ProbeWants(sorted(pids), tails, dirs, matches)

    def _looked_for(self, host: str, spec: JobSpec) -> bool:
        """Whether `host`'s probe has reported on the match of configured job `spec`."""
        return any(s is spec and (host, key) in self._match_reported for key, s in self._specs.items())

    def _touch(self, host: str) -> None:
        """What `wanted` reads of the host's jobs may have changed: build it again."""
        self._wants_stamp[host] = self._wants_stamp.get(host, 0) + 1

    # ------------------------------------------------------------------ feeding
    def update(self, host: str, sample: HostSample, now: float) -> None:
        # Host timestamps (start times, mtimes) are moved onto the local clock.
        skew = now - sample.time
        procs = sample.procs
        gone = {(g.pid, round(g.start_time, 2)): g for g in sample.gone} if sample.gone else {}
        jobs = self.states(host)
        for job in jobs:
            job.last_seen = now
            job.revision += 1
        if sample.tails:
            self._wiring.feed_tails(self._jobs, sample.tails, skew, now)
        if sample.dirs:
            feed_dirs(jobs, sample.dirs, skew)
        if sample.matches:
            self._match_reported.update((host, key) for key in sample.matches)
        pending = self._grouping.successors.get(host)
        if pending:
            pending[:] = [s for s in pending if s.expires_at > now]
            self._touch(host)
        # Grouping a frame that matches the last one grouped (same processes, GPU pids, candidates,
        # matches, job records) would change nothing: skip it. Never while a restart's new run is
        # awaited, nor while a new job is held back (the hold counts frames).
        frame = frame_key(sample)
        last = self._grouped.get(host)
        if (pending or last is None or host in self._grouping.holding or last[0] != frame
                or last[1] != self._records_key(host)):
            self._grouping.update(host, sample, now, held_by_leftovers(jobs, procs))
            give_short_ids(self.states(host))
            self._touch(host)
            self._grouped[host] = (frame, self._records_key(host))
        elif last[0] is not frame:
            self._grouped[host] = (frame, last[1])  # equal: keep the newest, compared by identity next time
        on_gpu = gpu_pids_of(sample.gpus)
        self._gpus[host] = tuple(sample.gpus)
        # A job whose members were all there last frame, in a frame with the same processes (pids, start
        # times, zombies) and the same job records, has them all still: checking each again changes nothing.
        steady = not gone and self._last_frame.get(host) == (frame, self._wants_stamp.get(host, 0))
        jobs = self.states(host)  # (grouping may have added or dropped some)
        if sample.notes or self._notes.get(host):  # what a gpuwatch did to these processes, from the host
            waiting = [*self._notes.get(host, ()), *((n, now) for n in sample.notes)]
            self._notes[host] = note_jobs(jobs, waiting, skew, now)
        owners = gpu_owners(sample.gpus, jobs)  # (None unless some GPU holds more than one process)
        for job in jobs:
            if job.exit is None and job.members and not (steady and not job.missing):
                track_members(job, procs, gone, skew, now)
            if job.members or job.exit is not None:
                observe(job, sample, on_gpu, skew, now, owners)
            elif job.spec is not None:
                judge(job, now, skew, looked=self._looked_for(host, job.spec))
            if (job.root is not None or job.leftovers is not None) and follow_leftovers(job, sample, skew, now):
                self._touch(host)  # the probe is to report the survivors (or no longer)
        if self._specs:
            note_broad_matches(jobs, self._specs, sample)  # a `match` that takes pid 1 or others' sessions
        parents = self._parents_of_frame.get(host)
        if parents is None or parents[0] != frame:
            evidence = TrainingEvidence.of(on_gpu, sample.candidates, sample.ml_loaded)
            parents = (frame, parents_to_watch(procs, [*on_gpu, *sample.candidates], evidence))
        elif parents[0] is not frame:
            parents = (frame, parents[1])  # equal: the same parents, under the newest key
        self._parents_of_frame[host] = parents
        self._parents[host] = parents[1]
        self._last_frame[host] = (frame, self._wants_stamp.get(host, 0))

    def _jobs_key(self, host: str) -> tuple:
        return jobs_key(self.states(host), len(self._grouping.dismissed), host in self._grouping.holding)

    def _records_key(self, host: str) -> tuple:
        """What `_jobs_key` says of the host's records, read without building it: outside grouping, which
        is followed by a new key, a record's members, root and output dir change only as records come,
        go or are replaced (each bumps the wants stamp), the dismissed set as a job is dismissed, and
        whether a job has ended as its processes are tracked (read here)."""
        return (self._wants_stamp.get(host, 0), len(self._grouping.dismissed),
                tuple([job.exit is None for job in self._by_host.get(host, {}).values()]))

    def _new_job(self, host: str, name: str, job_id: str, now: float, spec: JobSpec | None = None) -> JobState:
        self._serial += 1
        stall = self.settings.stall_after_for(spec)
        job = JobState(job_id, host, name, self._serial, spec=spec, first_seen=now, last_seen=now,
                       stall_after_s=stall, interp=LogInterpreter(self.rules, ProgressTracker()))
        if spec is not None:
            job.output_dir = spec.output_dir
        replaced = self._jobs.get(job_id)
        if replaced is not None:  # a record replaced under the same id leaves the host index too
            self._by_host.get(replaced.host, {}).pop(job_id, None)
        self._jobs[job_id] = job
        self._by_host.setdefault(host, {})[job_id] = job
        self._touch(host)
        if replaced is not None and replaced.host != host:
            self._touch(replaced.host)
        return job

    def _drop(self, job_id: str) -> None:
        """Remove a record and its log keys (dismissing, restarting and merging all start here)."""
        job = self._jobs.pop(job_id, None)
        if job is not None:
            self._by_host.get(job.host, {}).pop(job_id, None)
            self._touch(job.host)
        self._wiring.forget(job_id)
        self._captures.pop(job_id, None)

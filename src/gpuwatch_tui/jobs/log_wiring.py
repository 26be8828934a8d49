"""Log wiring: which followed file belongs to which job, and feeding what the probe read of it
into the job's buffers and its log interpreter.

The probe knows files only by a key (`j<serial>.log<n>`, `j<serial>.out`); this is the one place
that maps those keys back to jobs.
"""

from __future__ import annotations

import dataclasses

from ..model import DirStat, ProcInfo, TailChunk
from .discovery import log_paths
from .job_state import JobState
from .logtail import LogBuffer
from .settings import JobSettings

MAX_LOGS_PER_JOB = 4


def outdir_key(job: JobState) -> str:
    return f"j{job.serial}.out"


class LogWiring:
    def __init__(self, settings: JobSettings) -> None:
        self.settings = settings
        self._keys: dict[str, tuple[str, str]] = {}  # tail key -> (job id, path)
        self._by_job: dict[str, dict[str, str]] = {}  # job id -> {tail key: path}: asked every frame

    def attach(self, job: JobState, procs: list[ProcInfo], configured: tuple[str, ...]) -> None:
        """Give `job` a buffer for each log it writes: the configured paths (relative to the
        processes' cwd), else what discovery finds on their stdout/stderr."""
        paths: list[str] = []
        cwd = next((p.cwd for p in procs if p.cwd), None)
        for path in configured:
            if not path.startswith("/") and cwd:
                path = f"{cwd.rstrip('/')}/{path}"
            paths.append(path)
        if not configured:
            paths.extend(log_paths(procs))
        for path in paths:
            if path not in job.logs and len(job.logs) < MAX_LOGS_PER_JOB:
                job.logs[path] = LogBuffer(self.settings.tail_lines, self.settings.max_line_chars,
                                           self.settings.partial_stale_s)
                key = f"j{job.serial}.log{len(job.logs) - 1}"
                self._keys[key] = (job.id, path)
                self._by_job.setdefault(job.id, {})[key] = path
        if procs and job.started_at is None:
            job.started_at = min(p.start_time for p in procs)
            if job.interp is not None:
                job.interp.run_started_at = job.started_at

    def forget(self, job_id: str) -> None:
        for key in self._by_job.pop(job_id, {}):
            self._keys.pop(key, None)

    def tails_of(self, job_id: str) -> dict[str, str]:
        """key -> path for the probe to follow, in the order the logs were attached."""
        return dict(self._by_job.get(job_id, {}))

    def feed_tails(self, jobs: dict[str, JobState], chunks: list[TailChunk], skew: float, now: float) -> None:
        for chunk in chunks:
            ref = self._keys.get(chunk.key)
            if ref is None:
                continue
            job = jobs.get(ref[0])
            if job is None or ref[1] not in job.logs:
                continue
            # (its mtime moved onto the local clock there: no chunk copied)
            buf = job.logs[ref[1]]
            grew_at = buf.last_growth
            new, live = buf.feed_and_take(chunk, now, skew)
            if new:
                shutdown = job.interp.shutdown_lines
                job.interp.feed_lines(new, now)
                if grew_at is not None and not live and job.interp.shutdown_lines - shutdown == len(new):
                    # Only a launcher's shutdown lines ("Received 15 death signal", "closing signal SIGTERM"):
                    # no sign of the job working, so the log's silence goes on.
                    buf.last_growth = grew_at
            if live:
                job.interp.feed_live(live, now)


def feed_dirs(jobs: list[JobState], dirs: list[DirStat], skew: float) -> None:
    by_key = {outdir_key(j): j for j in jobs}
    for d in dirs:
        job = by_key.get(d.key)
        if job is not None:
            mtime = d.newest_mtime + skew if d.newest_mtime is not None else None
            job.outdir = dataclasses.replace(d, newest_mtime=mtime)


def log_lines(job: JobState, n: int | None = None) -> list[str]:
    """The primary log's last lines, the live progress bar as it is now last."""
    log = job.primary_log
    if log is None:
        return []
    lines = log.lines(n)
    if log.live and (not lines or lines[-1] != log.live):
        lines.append(log.live)
    return lines

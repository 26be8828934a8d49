"""DashboardSource over the live core (monitor.Monitor): the adapter the real dashboard runs on.

The job tracker may not offer every read yet; what it lacks degrades to empty (no log, no
processes beyond what the store knows) rather than failing.
"""

from __future__ import annotations

import time
from typing import Callable

from ..model import DirStat, ProcInfo


class MonitorSource:
    def __init__(self, monitor) -> None:
        self.monitor = monitor
        self.store = monitor.store
        self.paused = False
        self._jobs_cache: tuple[int, float, list[dict]] | None = None

    def now(self) -> float:
        return time.time()

    def jobs(self) -> list[dict]:
        # Several widgets ask within one refresh; compute once per store generation and second.
        now = self.now()
        key = (self.store.generation, int(now))
        if self._jobs_cache is None or self._jobs_cache[:2] != key:
            jobs = [dict(job) for job in self.monitor.jobs_json(now)]
            for job in jobs:
                job.setdefault("id", f"{job.get('host')}:{(job.get('pids') or [job.get('name')])[0]}")
            self._jobs_cache = (*key, jobs)
        return self._jobs_cache[2]

    def _tracker_call(self, name: str, job_id: str, default):
        method = getattr(self.monitor.tracker, name, None) if self.monitor.tracker is not None else None
        return default if method is None else method(job_id)

    def job_log(self, job_id: str) -> list[str]:
        return self._tracker_call("job_log", job_id, [])

    def job_log_total(self, job_id: str) -> int:
        return self._tracker_call("job_log_total", job_id, 0)

    def job_procs(self, job_id: str) -> list[ProcInfo]:
        procs = self._tracker_call("job_procs", job_id, None)
        if procs is not None:
            return procs
        job = next((j for j in self.jobs() if j["id"] == job_id), None)
        if job is None or job.get("host") not in self.store.hosts:
            return []
        known = self.store.hosts[job["host"]].procs
        return [known[pid] for pid in job.get("pids") or () if pid in known]

    def job_outdir(self, job_id: str) -> DirStat | None:
        return self._tracker_call("job_outdir", job_id, None)

    def subscribe(self, callback: Callable[[], None]) -> None:
        self.monitor.subscribe(callback)

    async def run(self) -> None:
        await self.monitor.run()

    async def stop(self) -> None:
        await self.monitor.stop()

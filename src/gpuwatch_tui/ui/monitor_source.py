"""DashboardSource over the live core (monitor.Monitor): the adapter the real dashboard runs on.

The job tracker may not offer every read yet; what it lacks degrades to empty (no log, no
processes beyond what the store knows) rather than failing.
"""

from __future__ import annotations

import time
from typing import Callable

from ..model import DirStat, ProcInfo
from ..store import Store


class MonitorSource:
    """Over a Monitor, or over a Config whose Monitor is built when `run()` starts.

    Building the Monitor (the job tracker, its rules) costs ~0.1 s: with a config it happens after
    the first frame, which meanwhile shows every configured host as "connecting".
    """

    def __init__(self, monitor=None, *, config=None) -> None:
        if (monitor is None) == (config is None):
            raise TypeError("MonitorSource needs a monitor or a config")
        self.monitor = monitor
        self._config = config
        self._subscribers: list[Callable[[], None]] = []
        if monitor is not None:
            self.store = monitor.store
        else:
            self.store = Store([h.name for h in config.hosts], config.settings.history)
        self.paused = False
        self._jobs_cache: tuple[int, list[dict]] | None = None

    def _build_monitor(self):
        if self.monitor is None:
            from ..monitor import Monitor

            self.monitor = Monitor(self._config)
            self.store = self.monitor.store
            for callback in self._subscribers:
                self.monitor.subscribe(callback)
            self._jobs_cache = None
        return self.monitor

    def now(self) -> float:
        return time.time()

    def jobs(self) -> list[dict]:
        # Several widgets ask within one refresh, and with many hosts the store changes many
        # times a second: the tracker's JSON (progress history included) is built at most
        # twice a second. Cells show whole seconds, so nothing visible is lost.
        if self.monitor is None:
            return []
        now = self.now()
        key = (int(now * 2),)
        if self._jobs_cache is None or self._jobs_cache[:1] != key:
            jobs = [dict(job) for job in self.monitor.jobs_json(now)]
            for job in jobs:
                job.setdefault("id", f"{job.get('host')}:{(job.get('pids') or [job.get('name')])[0]}")
            self._jobs_cache = (*key, jobs)
        return self._jobs_cache[1]

    def _tracker_call(self, name: str, job_id: str, default):
        tracker = getattr(self.monitor, "tracker", None)
        method = getattr(tracker, name, None) if tracker is not None else None
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

    def dismiss_job(self, job_id: str) -> bool:
        tracker = getattr(self.monitor, "tracker", None)
        if tracker is None:
            return False
        dismissed = bool(tracker.dismiss(job_id))
        self._jobs_cache = None  # the next read must not show it again
        for callback in self._subscribers:
            callback()
        return dismissed

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._subscribers.append(callback)
        if self.monitor is not None:
            self.monitor.subscribe(callback)

    async def run(self) -> None:
        monitor = self._build_monitor()
        for callback in self._subscribers:  # the store object changed: redraw from the new one
            callback()
        await monitor.run()

    async def stop(self) -> None:
        if self.monitor is not None:
            await self.monitor.stop()

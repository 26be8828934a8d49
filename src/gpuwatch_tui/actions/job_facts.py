"""Facts the actions need that the monitor gathers as jobs come and go, off the sampling path.

- At discovery: the probe's `capture` of each job's top process (argv, cwd, environ, outputs), once per
  (pid, start ticks), so a restart hours later uses what the job was started with, not a guess.
- At the end of a run a restart started: the wrapper's real exit status (`run_status`), into the job.
Requests run as tasks; a failed capture is not retried for the same process (it is gone or unreadable).
"""

from __future__ import annotations

import asyncio
import time

CAPTURE_TIMEOUT_S = 10.0


class JobFacts:
    def __init__(self, monitor) -> None:
        self.monitor = monitor
        self._asked: set[tuple[str, int, int]] = set()  # (job id, pid, start ticks) captured or in flight
        self._status_asked: set[str] = set()  # job ids whose run_status is read or in flight
        self._tasks: set[asyncio.Task] = set()

    def on_sample(self, host: str) -> None:
        tracker = self.monitor.tracker
        # The mutable records, not views: this runs on every frame and must cost next to nothing.
        for job in tracker.states(host):
            if not job.alive or job.root is None or not job.start_ticks.get(job.root[0]):
                continue
            key = (job.id, job.root[0], job.start_ticks[job.root[0]])
            if key not in self._asked:
                self._asked.add(key)
                self._spawn(self._capture(host, *key))
        for job_id, status_file in tracker.pending_exit_status(host):
            if job_id not in self._status_asked:
                self._status_asked.add(job_id)
                self._spawn(self._exit_status(host, job_id, status_file))

    def refresh(self, job_id: str) -> None:
        """Forget what was captured for a job (after a restart its top process is a new one)."""
        self._asked = {k for k in self._asked if k[0] != job_id}
        self._status_asked.discard(job_id)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _capture(self, host: str, job_id: str, pid: int, ticks: int) -> None:
        try:
            facts = await self.monitor.request(host, "capture", {"pid": pid, "start_ticks": ticks}, CAPTURE_TIMEOUT_S)
        except Exception:  # gone, unreadable, host down: a restart then says the facts are missing
            return
        self.monitor.tracker.set_capture(job_id, pid, ticks, facts, time.time())

    async def _exit_status(self, host: str, job_id: str, status_file: str) -> None:
        try:
            record = await self.monitor.request(host, "run_status", {"status_file": status_file}, CAPTURE_TIMEOUT_S)
        except Exception:
            return
        if record.get("running"):
            self._status_asked.discard(job_id)  # the wrapper is writing it: ask again next frame
            return
        self.monitor.tracker.set_exit_status(job_id, record.get("exit_code"), record.get("exit_signal"))
        self.monitor._notify()

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()

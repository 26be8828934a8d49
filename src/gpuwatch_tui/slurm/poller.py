"""Read the Slurm queue every poll_interval, for the dashboard: a task that calls back after each read.

A read that fails keeps the last known queue (SlurmWatch) and is reported through `note()`; the next
read is tried at the usual interval, never faster.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from .watch import SlurmWatch
from ..tasks import cancel_and_wait


class SlurmPoller:
    def __init__(self, watch: SlurmWatch, interval: float, on_change: Callable[[], None]) -> None:
        self.watch = watch
        self.interval = interval
        self.on_change = on_change
        self._task: asyncio.Task | None = None

    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self._loop(), name="slurm-queue")
        return self._task

    async def _loop(self) -> None:
        while True:
            if self.watch.polls:  # the first read was done before the hosts were built
                await asyncio.sleep(self.interval)
            try:
                await self.watch.poll()
            except Exception as exc:  # noqa: BLE001 - a parser bug must not end the dashboard's queue view
                self.watch.problems = [f"queue read failed: {type(exc).__name__}: {exc}"]
                self.watch.polls += 1
            self.on_change()

    def note(self) -> str | None:
        """One line when the last read failed or was partial, else None."""
        last = self.watch.last
        if last is not None and last.error:
            return f"queue not read ({time.strftime('%H:%M:%S', time.localtime(last.at))}): {last.error}"
        if self.watch.problems:
            return self.watch.problems[0]
        return None

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.watch.client.runner.close()

"""Sends alerts to their sinks without ever blocking the caller: one task per (event, sink),
each under the sink's timeout and rate limit. Failures are recorded, not raised."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

from .events import AlertEvent
from .sinks import Sink, SinkError

log = logging.getLogger("gpuwatch.alerts")


@dataclass(frozen=True)
class Delivery:
    sink: str
    subject: str
    ok: bool
    error: str = ""
    time: float = 0.0


class AlertDispatcher:
    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks = {s.name: s for s in sinks}
        self._tasks: set[asyncio.Task] = set()
        self.deliveries: deque[Delivery] = deque(maxlen=200)

    def dispatch(self, event: AlertEvent) -> None:
        """Start delivering `event` to its sinks and return at once."""
        for name in event.sinks:
            sink = self.sinks.get(name)
            if sink is None:
                continue  # e.g. `toast` in the headless watch: there is no dashboard
            if not sink.rate.allow():
                self.deliveries.append(Delivery(name, event.subject, False, "rate limited", time.time()))
                continue
            task = asyncio.get_running_loop().create_task(self._deliver(sink, event), name=f"alert:{name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _deliver(self, sink: Sink, event: AlertEvent) -> None:
        try:
            await asyncio.wait_for(sink.send(event), sink.timeout_s)
        except asyncio.TimeoutError:
            self._record(sink.name, event, f"no delivery within {sink.timeout_s:g}s")
        except SinkError as exc:
            self._record(sink.name, event, str(exc))
        except Exception as exc:  # a sink's surprise must not end the watch
            self._record(sink.name, event, f"{type(exc).__name__}: {exc}")
        else:
            self.deliveries.append(Delivery(sink.name, event.subject, True, "", time.time()))

    def _record(self, sink: str, event: AlertEvent, error: str) -> None:
        log.warning("alert to %s for %s failed: %s", sink, event.subject, error)
        self.deliveries.append(Delivery(sink, event.subject, False, error, time.time()))

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float) -> None:
        """Wait up to `timeout` for deliveries in flight (at shutdown), then cancel the rest."""
        tasks = list(self._tasks)
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=1)

"""Alerts over a running Monitor: evaluates the rules every tick and dispatches what fires.

The dashboard and `gpuwatch watch --alerts` both use this; the dashboard adds a toast sink.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Callable

from .dispatch import AlertDispatcher
from .engine import AlertEngine, host_facts_from_store
from .events import AlertEvent
from .settings import AlertsConfig
from .sinks import CallbackSink, HookSink, Sink, TerminalSink, WebhookSink
from ..tasks import cancel_and_wait


def terminal_writer() -> Callable[[bytes], None] | None:
    """Writes to the controlling terminal (not stdout, which may carry JSON); None without one."""
    try:
        fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        return None

    def write(data: bytes) -> None:
        try:
            os.write(fd, data)
        except OSError:
            pass

    return write


def build_sinks(config: AlertsConfig, toast: Callable[[AlertEvent], None] | None = None,
                write: Callable[[bytes], None] | None = None) -> list[Sink]:
    sinks: list[Sink] = []
    if toast is not None:
        sinks.append(CallbackSink(toast))
    if write is not None:
        sinks.append(TerminalSink("bell", write))
        sinks.append(TerminalSink("desktop", write, config.terminal))
    if config.hook is not None:
        sinks.append(HookSink(config.hook))
    if config.webhook is not None:
        sinks.append(WebhookSink(config.webhook))
    return sinks


class AlertRunner:
    def __init__(self, monitor, config: AlertsConfig, sinks: list[Sink],
                 on_event: Callable[[AlertEvent], None] | None = None, tick_s: float = 1.0) -> None:
        self.monitor = monitor
        self.engine = AlertEngine(config)
        self.dispatcher = AlertDispatcher(sinks)
        self.on_event = on_event
        self.tick_s = tick_s
        self.fired: list[AlertEvent] = []
        self._task: asyncio.Task | None = None

    def evaluate(self, now: float | None = None) -> list[AlertEvent]:
        now = time.time() if now is None else now
        tracker = self.monitor.tracker
        jobs = tracker.views(now) if tracker is not None else []
        events = self.engine.observe(jobs, host_facts_from_store(self.monitor.store), now)
        for event in events:
            self.fired.append(event)
            del self.fired[:-500]
            if self.on_event is not None:
                self.on_event(event)
            self.dispatcher.dispatch(event)
        return events

    async def _loop(self) -> None:
        while True:
            try:
                self.evaluate()
            except Exception as exc:  # a rule's surprise must not stop the alerts
                print(f"gpuwatch: alerts: {type(exc).__name__}: {exc}", file=sys.stderr)
            await asyncio.sleep(self.tick_s)

    def start(self) -> asyncio.Task:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="alerts")
        return self._task

    async def stop(self, drain_s: float = 5.0) -> None:
        await cancel_and_wait(self._task)
        await self.dispatcher.drain(drain_s)

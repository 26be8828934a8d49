"""Where alerts go. Each sink is an async `send(event)`; the dispatcher runs it as a task with a
timeout and applies the sink's rate limit, so no sink can block the dashboard or the watch."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import deque
from typing import Callable, Mapping

from .events import AlertEvent
from .settings import HookSettings, WebhookSettings
from .terminal import BEL, desktop_notification


class SinkError(Exception):
    """A sink could not deliver; the words say why (logged, never raised into the UI)."""


class RateLimit:
    """At most `per_minute` sends in any 60 s window; the rest are dropped and counted."""

    def __init__(self, per_minute: int, window_s: float = 60.0) -> None:
        self.per_minute = per_minute
        self.window_s = window_s
        self._sent: deque[float] = deque()
        self.dropped = 0

    def allow(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        while self._sent and now - self._sent[0] >= self.window_s:
            self._sent.popleft()
        if len(self._sent) >= self.per_minute:
            self.dropped += 1
            return False
        self._sent.append(now)
        return True


class Sink:
    name = "sink"
    timeout_s = 10.0

    def __init__(self, per_minute: int = 60) -> None:
        self.rate = RateLimit(per_minute)

    async def send(self, event: AlertEvent) -> None:
        raise NotImplementedError


class CallbackSink(Sink):
    """The dashboard toast: the app hands in a callback that posts a message (no I/O here)."""

    name = "toast"

    def __init__(self, callback: Callable[[AlertEvent], None], per_minute: int = 30) -> None:
        super().__init__(per_minute)
        self.callback = callback

    async def send(self, event: AlertEvent) -> None:
        self.callback(event)


class TerminalSink(Sink):
    """The bell, or a desktop notification through the terminal (OSC 777 / 9 / 99, tmux-wrapped)."""

    timeout_s = 2.0

    def __init__(self, name: str, write: Callable[[bytes], None], terminal: str = "auto",
                 env: Mapping[str, str] | None = None, per_minute: int = 20) -> None:
        super().__init__(per_minute)
        self.name = name
        self.write = write
        self.terminal = terminal
        self.env = env

    def payload(self, event: AlertEvent) -> bytes:
        if self.name == "bell":
            return BEL
        return desktop_notification(event.title, event.message, self.terminal, self.env)

    async def send(self, event: AlertEvent) -> None:
        self.write(self.payload(event))


class HookSink(Sink):
    """Runs the configured argv (no shell) with the event's JSON on stdin; killed at the timeout."""

    name = "hook"

    def __init__(self, settings: HookSettings) -> None:
        super().__init__(settings.per_minute)
        self.settings = settings
        self.timeout_s = settings.timeout_s + 1  # the hook's own limit first, then the dispatcher's

    async def send(self, event: AlertEvent) -> None:
        data = (json.dumps(event.to_json()) + "\n").encode()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.settings.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
                env={**os.environ, "GPUWATCH_ALERT": event.trigger},
            )
        except OSError as exc:
            raise SinkError(f"hook {self.settings.command[0]!r} could not start: {exc.strerror or exc}") from None
        try:
            _, err = await asyncio.wait_for(proc.communicate(data), self.settings.timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            proc.kill()  # our own child, by its pid
            await proc.wait()
            raise SinkError(f"hook {self.settings.command[0]!r} ran past {self.settings.timeout_s:g}s: killed") from None
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
            raise SinkError(f"hook {self.settings.command[0]!r} exited {proc.returncode}"
                            + (f": {tail[0][:200]}" if tail else ""))


class WebhookSink(Sink):
    """POSTs Slack-compatible JSON with httpx; retries 5xx, 429 and transport errors with backoff."""

    name = "webhook"
    RETRY_STATUS = frozenset({429, 500, 502, 503, 504})

    def __init__(self, settings: WebhookSettings, backoff_s: float = 0.5) -> None:
        super().__init__(settings.per_minute)
        self.settings = settings
        self.backoff_s = backoff_s
        # every attempt and its pauses must fit: the dispatcher's timeout is the last word
        self.timeout_s = (settings.retries + 1) * settings.timeout_s + backoff_s * 2 ** (settings.retries + 1)
        self.attempts = 0

    async def send(self, event: AlertEvent) -> None:
        import httpx  # only when a webhook is configured

        body = event.slack_body()
        last = ""
        async with httpx.AsyncClient(timeout=self.settings.timeout_s, follow_redirects=False) as client:
            for attempt in range(self.settings.retries + 1):
                if attempt:
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * random.uniform(0.8, 1.2))
                self.attempts += 1
                try:
                    response = await client.post(self.settings.url, json=body)
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    continue
                if response.status_code < 300:
                    return
                last = f"HTTP {response.status_code}"
                if response.status_code not in self.RETRY_STATUS:
                    break
        raise SinkError(f"webhook gave up: {last}")

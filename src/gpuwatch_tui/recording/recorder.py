"""Records a running Monitor: every sample as it arrives, and one line per sample interval.

`Recorder` writes one file; `RollingRecorder` writes hourly files in a directory and deletes the
ones older than the retention (the dashboard's `[settings] record = "DIR"`), so last night is
always there and the disk does not fill.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from .. import __version__
from . import format as fmt
from .encoder import TickEncoder
from .files import RecordingWriter, why_not_written
from .format import RecordingError

ROLL_EVERY_S = 3600.0
RETRY_EVERY_S = 10.0  # a rolling recording stopped by a full disk tries a new file this often
FILE_GLOB = "gpuwatch-*.jsonl.gz"


def settings_json(settings) -> dict:
    return {"sample_interval": settings.sample_interval, "history": settings.history,
            "stall_after": settings.stall_after, "stale_after": settings.stale_after}


class Recorder:
    """Writes what `monitor` knows into `path` until `stop()`; `ticks` counts the lines written."""

    def __init__(self, monitor, path: Path | str) -> None:
        self.monitor = monitor
        self.path = Path(path)
        self.ticks = 0
        self._encoder = TickEncoder()
        self._seen: dict[str, float] = {}
        self._writer: RecordingWriter | None = None
        self._task: asyncio.Task | None = None
        self.failure: str | None = None  # why writing stopped (a full disk); what was written stays readable

    def open(self, now: float | None = None, subscribe: bool = True) -> None:
        """Create the file and write its header; `subscribe=False` when an owner forwards changes."""
        now = time.time() if now is None else now
        head = fmt.header(list(self.monitor.sessions), settings_json(self.monitor.settings), now,
                          source=f"gpuwatch {__version__}")
        self._writer = RecordingWriter(self.path, head)
        if subscribe:
            self.monitor.subscribe(self._on_change)

    def on_change(self) -> None:
        self._on_change()

    def _on_change(self) -> None:
        # Called after each sample or state change: keep every new sample, not only each tick's latest.
        if self._writer is None:
            return  # closed (an hourly file that was rolled over): the Monitor has no unsubscribe
        for host, sample in self.monitor.last_samples.items():
            if self._seen.get(host) != sample.time:
                self._seen[host] = sample.time
                self._encoder.sample(host, sample)

    def tick(self, now: float | None = None) -> None:
        """Write one line: what changed since the last one."""
        if self._writer is None:
            return
        now = time.time() if now is None else now
        self._on_change()
        monitor = self.monitor
        states = {name: {"state": rec.state, "error": rec.error, "hint": rec.hint, "retry_at": rec.retry_at,
                         "reconnects": rec.reconnects} for name, rec in monitor.store.hosts.items()}
        tracker = monitor.tracker
        views = tracker.views(now) if tracker is not None else []
        jobs = [view.to_json() for view in views]
        ids = [view.id for view in views]
        logs = {i: (tracker.log_lines(i), tracker.log_total(i)) for i in ids} if tracker else {}
        jprocs = {i: tracker.procs(i) for i in ids} if tracker else {}
        outdirs = {i: tracker.outdir(i) for i in ids} if tracker else {}
        try:
            self._writer.write(self._encoder.tick(now, states, jobs, logs, jprocs, outdirs))
        except OSError as exc:
            self._fail(exc)
            return
        self.ticks += 1

    def flush(self) -> None:
        """Everything so far on the disk now (OSError when it cannot be: the recorder then stops)."""
        if self._writer is not None:
            try:
                self._writer.flush()
            except OSError as exc:
                self._fail(exc)
                raise

    def _fail(self, exc: OSError) -> None:
        self.failure = f"writing {self.path} failed after {self.ticks} sample intervals: {why_not_written(exc)}"
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abandon()

    async def run(self, interval: float | None = None, stop: asyncio.Event | None = None,
                  count: int | None = None) -> None:
        """Tick every `interval` (the sample interval) until `stop` is set or `count` lines were written."""
        interval = interval or self.monitor.settings.sample_interval
        stop = stop or asyncio.Event()
        next_at = time.monotonic()
        while not stop.is_set() and self.failure is None:
            self.tick()
            if count is not None and self.ticks >= count:
                return
            next_at += interval
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    def bytes_written(self) -> int:
        return self._writer.bytes_written() if self._writer is not None else 0

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError as exc:
                self.failure = self.failure or (f"closing {self.path} failed after {self.ticks} sample intervals: "
                                                f"{why_not_written(exc)}")


def rolling_name(t: float) -> str:
    return time.strftime("gpuwatch-%Y%m%dT%H%M%SZ.jsonl.gz", time.gmtime(t))


class RollingRecorder:
    """Hourly recording files in `directory`; files older than `retention_s` are deleted."""

    def __init__(self, monitor, directory: Path | str, retention_s: float, roll_every_s: float = ROLL_EVERY_S) -> None:
        self.monitor = monitor
        self.directory = Path(directory).expanduser()
        self.retention_s = retention_s
        self.roll_every_s = roll_every_s
        self.current: Recorder | None = None
        self._opened_at = 0.0
        self._stop = asyncio.Event()
        self._next_tick = 0.0
        self.problem: str | None = None  # why recording stopped (the disk is full, the directory cannot be written)
        self.listeners: list = []  # called with the problem (str) when recording stops, None when it resumes
        self._retry_at = 0.0

    def _roll(self, now: float) -> None:
        if self.current is not None:
            self.current.close()
            # The old recorder stays subscribed but is closed: it no longer writes anything.
        path = self.directory / rolling_name(now)
        n = 1
        while path.exists():
            n += 1
            path = self.directory / rolling_name(now).replace(".jsonl.gz", f"-{n}.jsonl.gz")
        self.current = Recorder(self.monitor, path)  # a fresh encoder: each file stands alone
        self.current.open(now, subscribe=False)
        self._opened_at = now
        self.prune(now)

    def prune(self, now: float | None = None) -> list[Path]:
        """Delete recordings in the directory whose last write is older than the retention."""
        now = time.time() if now is None else now
        removed = []
        for path in sorted(self.directory.glob(FILE_GLOB)):
            if self.current is not None and path == self.current.path:
                continue
            try:
                if now - path.stat().st_mtime > self.retention_s:
                    path.unlink()
                    removed.append(path)
            except OSError:
                pass  # gone already, or not ours to delete: leave it
        return removed

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if self.current is None or now - self._opened_at >= self.roll_every_s:
            self._roll(now)
        self.current.tick(now)

    def attach(self) -> None:
        """Record from the Monitor's own change notifications (no task of its own): every sample as
        it arrives, one line per sample interval. A failure to write (a full disk) stops recording, with
        `problem` saying why and the listeners told; a new file is tried every RETRY_EVERY_S and recording
        resumes once one can be written. The dashboard keeps running throughout."""
        self.monitor.subscribe(self._on_change)

    def _on_change(self) -> None:
        if self.problem is not None:
            if time.monotonic() >= self._retry_at:
                self._resume()
            return
        try:
            if self.current is not None:
                self.current.on_change()
            if time.monotonic() >= self._next_tick:
                self._next_tick = time.monotonic() + self.monitor.settings.sample_interval
                self.tick()
        except (OSError, ValueError, RecordingError) as exc:  # the directory gone, unwritable
            self._stopped(str(exc))
            return
        if self.current is not None and self.current.failure is not None:  # the disk filled up
            self._stopped(self.current.failure)

    def _stopped(self, why: str) -> None:
        """Stop writing, say why (once), and try a new file every RETRY_EVERY_S."""
        self.problem = (f"recording to {self.directory} stopped: {why}; what was recorded replays; "
                        f"trying again every {RETRY_EVERY_S:.0f}s")
        self.close()
        self._retry_at = time.monotonic() + RETRY_EVERY_S
        self._tell(self.problem)

    def _resume(self) -> None:
        """A new file, flushed at once: it only counts as resumed when its first bytes are on the disk."""
        self._retry_at = time.monotonic() + RETRY_EVERY_S
        try:
            self._roll(time.time())
            self.current.tick()
            self.current.flush()
        except (OSError, ValueError, RecordingError):
            failed, self.current = self.current, None
            if failed is not None:
                failed.close()
                try:
                    if failed.path.stat().st_size == 0:
                        failed.path.unlink()  # an empty file per attempt would only clutter the directory
                except OSError:
                    pass
            return
        self.problem = None
        self._next_tick = time.monotonic() + self.monitor.settings.sample_interval
        self._tell(None)

    def _tell(self, problem: str | None) -> None:
        for listener in list(self.listeners):
            listener(problem)

    def close(self) -> None:
        if self.current is not None:
            try:
                self.current.close()
            except OSError:
                pass
            self.current = None

    async def run(self) -> None:
        interval = self.monitor.settings.sample_interval
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                self.tick()
                next_at += interval
                try:
                    await asyncio.wait_for(self._stop.wait(), max(0.0, next_at - time.monotonic()))
                except asyncio.TimeoutError:
                    pass
        finally:
            if self.current is not None:
                self.current.close()

    def stop(self) -> None:
        self._stop.set()

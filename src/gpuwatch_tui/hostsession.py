"""One host: keep a connection and a probe alive, turn frames into samples, report state.

Reconnects with exponential backoff and jitter; restarts a probe that died; marks the host
stale when frames stop arriving, long before a dead link is torn down by keepalive.
"""

from __future__ import annotations

import asyncio
import random
import time
import sys
from typing import TYPE_CHECKING, Protocol

from .config import HostConfig, Settings
from .model import HostSample
from .probe.frames import PROTOCOL_VERSION, parse_sample
from .transport.failure import ConnectFailure
from .transport.link import LocalProbeLink, ProbeExited, ProbeLink

if TYPE_CHECKING:
    import asyncssh

    from .transport.ssh import SshConnector

PING_EVERY_S = 5.0
# The probe exits if it hears nothing from us for this long (a blackholed link never closes).
PROBE_IDLE_EXIT_S = 30.0


def _ssh_errors() -> tuple[type[BaseException], ...]:
    """asyncssh's error base, if an SSH host made us import it (local-only runs never do)."""
    asyncssh = sys.modules.get("asyncssh")
    return (asyncssh.Error,) if asyncssh is not None else ()


class SessionSink(Protocol):
    def host_state(self, host: str, state: str, error: str | None, hint: str | None) -> None: ...
    def host_sample(self, host: str, sample: HostSample) -> None: ...


class HostSession:
    def __init__(self, host: HostConfig, settings: Settings, connector: SshConnector | None, sink: SessionSink) -> None:
        self.host = host
        self.settings = settings
        self.connector = connector
        self.sink = sink
        self.state = "connecting"
        self.link: ProbeLink | None = None
        self.conn: asyncssh.SSHClientConnection | None = None
        self.wants: dict = {"op": "want", "pids": [], "tails": {}, "dirs": {}, "matches": {}}
        self.last_frame_at: float | None = None
        self.hello: dict | None = None
        self.samples = 0
        self.bad_frames = 0
        # monotonic times of the latest attempt's steps (for `doctor`-style reports and benchmarks)
        self.timeline: dict[str, float] = {}
        self.last_bad_frame: str | None = None
        self._stopping = False
        self._task: asyncio.Task | None = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self.run(), name=f"host:{self.host.name}")
        return self._task

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self._teardown()

    async def _teardown(self, keep_conn: bool = False) -> None:
        link, self.link = self.link, None
        # A link that has gone quiet will not carry a goodbye: don't wait for one (a blackholed
        # host must not hold up `status` or shutdown; the probe leaves by its idle timeout).
        quiet = self.state == "stale" or (self.conn is not None and self.conn.is_closed())
        if link is not None:
            try:
                await link.close(wait=0.3 if quiet else 3.0)
            except Exception:
                pass
        if keep_conn:
            return
        conn, self.conn = self.conn, None
        if conn is not None:
            if quiet:
                conn.abort()
            else:
                conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 1 if quiet else 3)
            except Exception:
                pass

    def _set(self, state: str, error: str | None = None, hint: str | None = None) -> None:
        self.state = state
        self.sink.host_state(self.host.name, state, error, hint)

    def _options(self) -> dict:
        return {
            "interval": self.settings.sample_interval,
            "gpu_source": self.host.gpu_source,
            "idle_exit_s": PROBE_IDLE_EXIT_S if not self.host.local else 0,
        }

    # -- requests to the probe -----------------------------------------------------
    async def set_wants(self, pids: list[int], tails: dict[str, str], dirs: dict[str, str], matches: dict[str, dict]) -> None:
        wants = {"op": "want", "pids": sorted(set(pids)), "tails": tails, "dirs": dirs, "matches": matches}
        if wants == self.wants:
            return
        self.wants = wants
        await self._send(wants)

    async def _send(self, request: dict) -> None:
        link = self.link
        if link is None:
            return
        try:
            await link.send(request)
        except Exception:
            pass  # the read loop will notice the broken link

    # -- the loop ------------------------------------------------------------------
    async def run(self) -> None:
        attempt = 0
        self._set("connecting")
        while not self._stopping:
            if self.state in ("connected", "stale"):
                # A working link just broke: say so until the next attempt tells us more.
                self._set("reconnecting", self._last_error)
            served_for = 0.0
            try:
                await self._connect()
                started = time.monotonic()
                try:
                    await self._serve()
                finally:
                    served_for = time.monotonic() - started if self._was_serving else 0.0
            except ConnectFailure as failure:
                self._last_error = failure.reason
                await self._teardown()
                attempt += 1
                delay = self._backoff(max(attempt, 4) if failure.state != "unreachable" else attempt)
                # The failure state stays put while we retry: a status taken between two
                # attempts must still say why the host is not being watched.
                self._set(failure.state, f"{failure.reason} (retrying in {delay:.0f}s)"
                          if delay >= 1 else failure.reason, failure.hint)
                if self._stopping:
                    break
                await asyncio.sleep(delay)
                continue
            except ProbeExited as exc:
                if await self._conn_lost():
                    self._last_error = "connection lost"
                    await self._teardown()
                elif not self._was_serving:
                    self._last_error = str(exc)
                    await self._teardown()
                    self._set("probe-failed", str(exc),
                              f"check that `{self.host.python}` runs on {self.host.name}"
                              + (" through the prefix" if self.host.prefix else ""))
                else:
                    # The probe died (killed, crashed) but the connection is fine: restart
                    # just the probe on the same connection.
                    self._last_error = f"{exc}; restarting the probe"
                    await self._teardown(keep_conn=True)
            except (*_ssh_errors(), OSError, asyncio.IncompleteReadError) as exc:
                self._last_error = f"connection lost: {exc}"
                await self._teardown()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let one host's surprise end its session silently
                self._last_error = f"{type(exc).__name__}: {exc}"
                await self._teardown()
                attempt += 1
                self._set("unreachable", f"unexpected error: {self._last_error}")
                if self._stopping:
                    break
                await asyncio.sleep(self._backoff(attempt))
                continue
            if self._stopping:
                break
            # A link that worked for a while is retried at once; one that keeps failing
            # right after it starts backs off like a refused connect.
            attempt = 0 if served_for >= 10 else attempt + 1
            await asyncio.sleep(self._backoff(attempt))

    _last_error: str | None = None
    _was_serving = False

    async def _conn_lost(self) -> bool:
        if self.host.local:
            return False
        conn = self.conn
        if conn is None:
            return True
        await asyncio.sleep(0)  # let asyncssh finish tearing a dead connection down
        return conn.is_closed() or getattr(conn, "_transport", True) is None

    def _backoff(self, attempt: int) -> float:
        if attempt == 0:
            return 0.2  # it was working a moment ago: retry at once
        delay = min(self.settings.reconnect_max_delay, self.settings.reconnect_initial_delay * 2 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)  # jitter: a fleet must not reconnect in lockstep

    async def _connect(self) -> None:
        self._was_serving = False
        if self.host.local:
            self.link = await LocalProbeLink.start(self.host, self._options())
            return
        assert self.connector is not None
        self.timeline = {"start": time.monotonic()}
        if self.conn is None or self.conn.is_closed():
            self.conn = None
            self.conn = await self.connector.connect(self.host)
        self.timeline["ssh"] = time.monotonic()
        import asyncssh  # only SSH hosts pay for importing it

        from .transport.ssh_link import SshProbeLink

        try:
            self.link = await SshProbeLink.start(self.conn, self.host, self._options())
            self.timeline["probe_sent"] = time.monotonic()
        except asyncssh.ChannelOpenError as exc:
            raise ProbeExited(None, f"could not open a session channel: {exc.reason}") from None

    async def _serve(self) -> bool:
        """Read frames until the probe or the link dies. Returns whether any frame arrived."""
        assert self.link is not None
        link = self.link
        watchdog = asyncio.create_task(self._watch(link))
        try:
            hello = await asyncio.wait_for(link.next_frame(), self.settings.connect_timeout + 10)
            if hello.get("type") == "fatal":
                raise ProbeExited(None, hello.get("error", "probe failed"))
            if hello.get("v") != PROTOCOL_VERSION:
                raise ProbeExited(None, f"probe speaks protocol {hello.get('v')}, expected {PROTOCOL_VERSION}")
            self.hello = hello
            self.timeline["hello"] = time.monotonic()
            self._was_serving = True
            await link.send(self.wants)
            while True:
                frame = await link.next_frame()
                kind = frame.get("type")
                if kind == "sample":
                    try:
                        sample = parse_sample(frame)
                    except (KeyError, TypeError, ValueError) as exc:
                        # One malformed frame (a newer or broken probe) is dropped, not fatal.
                        self.bad_frames += 1
                        self.last_bad_frame = f"{type(exc).__name__}: {exc}"
                        continue
                    self.last_frame_at = time.monotonic()
                    self.samples += 1
                    if self.state != "connected":
                        self._set("connected")
                    self.sink.host_sample(self.host.name, sample)
                elif kind == "fatal":
                    raise ProbeExited(None, frame.get("error", "probe failed"))
        except asyncio.TimeoutError:
            raise ProbeExited(None, "no answer from the probe") from None
        finally:
            watchdog.cancel()

    async def _watch(self, link: ProbeLink) -> None:
        """Ping the probe (it exits without them) and mark the host stale when frames stop."""
        next_ping = time.monotonic() + PING_EVERY_S
        while True:
            await asyncio.sleep(min(0.5, self.settings.stale_after / 4))
            now = time.monotonic()
            if now >= next_ping:
                next_ping = now + PING_EVERY_S
                asyncio.ensure_future(self._send({"op": "ping"}))
            if self.state == "connected" and self.last_frame_at is not None:
                age = now - self.last_frame_at
                if age > self.settings.stale_after:
                    self._set("stale", f"no sample for {age:.0f}s")

"""The probe feed: one host's probe kept alive, its frames turned into samples, requests carried.

Reconnects with exponential backoff and jitter; restarts a probe that died; marks the host
stale when frames stop arriving, long before a dead link is torn down by keepalive. The same
feed serves SSH hosts and the local machine: the transport's ProbeChannel says how to reach it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import TYPE_CHECKING

from ..config_records import HostConfig, Settings
from ..probe.wire import PROTOCOL_VERSION
from ..requests import BAD_ARGS, HOST_DOWN, LINK_LOST, TIMEOUT, RequestError
from ..tasks import cancel_and_wait
from ..transport.channel_choice import probe_channel
from ..transport.failure import ConnectFailure
from ..transport.link import ProbeBrokeContract, ProbeExited, ProbeLink
from ..vocab import HOST_PROBE_FAILED
from .base import DEFAULT_REQUEST_TIMEOUT_S, FeedSink, HostFeed
from .pending import PendingRequests
from .probe_frames import FactCache, parse_sample

if TYPE_CHECKING:
    from ..transport.ssh import SshConnector

PING_EVERY_S = 5.0
# The probe exits if it hears nothing from us for this long (a blackholed link never closes).
PROBE_IDLE_EXIT_S = 30.0


class HostSession(HostFeed):
    def __init__(self, host: HostConfig, settings: Settings, connector: SshConnector | None, sink: FeedSink) -> None:
        self.host = host
        self.name = host.name
        self.settings = settings
        self.sink = sink
        self.state = "connecting"
        self.channel = probe_channel(host, connector)
        self.link: ProbeLink | None = None
        self._want_frame: dict = {"op": "want", "pids": [], "tails": {}, "dirs": {}, "matches": {}}
        self.last_frame_at: float | None = None
        self.hello: dict | None = None
        self.samples = 0
        self.bad_frames = 0
        self.last_bad_frame: str | None = None
        self._pending = PendingRequests()
        self._stopping = False
        self._task: asyncio.Task | None = None

    @property
    def timeline(self) -> dict[str, float]:
        """monotonic times of the latest attempt's steps (for `doctor`-style reports and benchmarks)"""
        return self.channel.timeline

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self.run(), name=f"host:{self.host.name}")
        return self._task

    async def stop(self) -> None:
        self._stopping = True
        self._pending.fail_all(LINK_LOST, f"{self.name}: the watch stopped before a reply came")
        await cancel_and_wait(self._task)
        await self._teardown()

    async def _teardown(self, keep_conn: bool = False) -> None:
        link, self.link = self.link, None
        self._serving = False
        # Nothing will answer the requests sent down this link: fail them now, not at their timeouts.
        self._pending.fail_all(LINK_LOST, f"{self.name}: link lost before the reply came"
                               + (f" ({self._last_error})" if self._last_error else ""))
        # A link that has gone quiet will not carry a goodbye: don't wait for one (a blackholed
        # host must not hold up `status` or shutdown; the probe leaves by its idle timeout).
        quiet = self.state == "stale" or self.channel.is_quiet()
        if link is not None:
            try:
                await link.close(wait=0.3 if quiet else 3.0)
            except Exception:
                pass
        if not keep_conn:
            await self.channel.close(quiet)

    def _set(self, state: str, error: str | None = None, hint: str | None = None,
             retry_at: float | None = None) -> None:
        self.state = state
        self.sink.host_state(self.host.name, state, error, hint, retry_at)

    def _options(self) -> dict:
        return {
            "interval": self.settings.sample_interval,
            "gpu_source": self.host.gpu_source,
            "idle_exit_s": PROBE_IDLE_EXIT_S if not self.host.local else 0,
            "fact_deltas": True,  # fixed process facts only when they change (FactCache fills them in)
        }

    # -- requests to the probe -----------------------------------------------------
    async def wants(self, pids: list[int], tails: dict[str, str], dirs: dict[str, str], matches: dict[str, dict]) -> None:
        frame = {"op": "want", "pids": sorted(set(pids)), "tails": tails, "dirs": dirs, "matches": matches}
        if frame == self._want_frame:
            return
        self._want_frame = frame
        await self._send(frame)

    async def request(self, op: str, args: dict | None = None, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict:
        if not isinstance(op, str) or not op:
            raise RequestError(BAD_ARGS, f"an op is a name, not {op!r}")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise RequestError(BAD_ARGS, f"arguments of {op} must be a dict, not {type(args).__name__}")
        if not timeout > 0:
            raise RequestError(BAD_ARGS, f"timeout must be positive, not {timeout!r}")
        link = self.link
        if link is None or not self._serving:
            why = f" ({self._last_error})" if self.state != "connecting" and self._last_error else ""
            raise RequestError(HOST_DOWN, f"{self.name} is {self.state}{why}: {op} not sent")
        rid, reply = self._pending.open()
        try:
            frame = json.dumps({"op": op, "id": rid, "args": args}, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            self._pending.forget(rid)
            raise RequestError(BAD_ARGS, f"arguments of {op} are not JSON: {exc}") from None

        async def exchange() -> dict:
            await link.send_line(frame)  # under the timeout too: a stalled link blocks the write
            return await reply

        try:
            return await asyncio.wait_for(exchange(), timeout)
        except asyncio.TimeoutError:
            stale = f"; no sample for {time.monotonic() - self.last_frame_at:.0f}s" \
                if self.state == "stale" and self.last_frame_at is not None else ""
            raise RequestError(TIMEOUT, f"{self.name}: no reply to {op} within {timeout:g}s{stale}") from None
        except (OSError, EOFError, *self.channel.link_errors()) as exc:
            raise RequestError(LINK_LOST, f"{self.name}: could not send {op}: {exc}") from None
        finally:
            self._pending.forget(rid)

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
                          if delay >= 1 else failure.reason, failure.hint, time.time() + delay)
                if self._stopping:
                    break
                await asyncio.sleep(delay)
                continue
            except ProbeBrokeContract as exc:
                # Garbage or truncated frames instead of samples: say so and back off like a failed start
                # (what made the stream break may still be there next time).
                self._last_error = str(exc)
                await self._teardown()
                attempt += 1
                delay = self._backoff(max(attempt, 2))
                self._set(HOST_PROBE_FAILED, f"{exc} (retrying in {delay:.0f}s)",
                          f"check what else writes to stdout on {self.host.name} (a login script, "
                          f"`{self.host.python}` itself)", time.time() + delay)
                if self._stopping:
                    break
                await asyncio.sleep(delay)
                continue
            except ProbeExited as exc:
                if await self.channel.is_lost():
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
            except (*self.channel.link_errors(), OSError, asyncio.IncompleteReadError) as exc:
                self._last_error = f"connection lost: {exc}"
                await self._teardown()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let one host's surprise end its session silently
                self._last_error = f"{type(exc).__name__}: {exc}"
                await self._teardown()
                attempt += 1
                delay = self._backoff(attempt)
                self._set("unreachable", f"unexpected error: {self._last_error}", None, time.time() + delay)
                if self._stopping:
                    break
                await asyncio.sleep(delay)
                continue
            if self._stopping:
                break
            # A link that worked for a while is retried at once; one that keeps failing
            # right after it starts backs off like a refused connect.
            attempt = 0 if served_for >= 10 else attempt + 1
            await asyncio.sleep(self._backoff(attempt))

    _last_error: str | None = None
    _hello_at: float | None = None
    _was_serving = False  # this attempt got as far as the probe's hello
    _serving = False  # the current link is up and takes requests

    def _backoff(self, attempt: int) -> float:
        if attempt == 0:
            return 0.2  # it was working a moment ago: retry at once
        delay = min(self.settings.reconnect_max_delay, self.settings.reconnect_initial_delay * 2 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)  # jitter: a fleet must not reconnect in lockstep

    async def _connect(self) -> None:
        self._was_serving = False
        self.link = await self.channel.open_probe(self._options())

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
            # A probe that announces fact deltas gets a fresh cache per run; an older one sends full frames.
            facts = FactCache() if hello.get("fact_deltas") else None
            self.timeline["hello"] = self._hello_at = time.monotonic()
            self._was_serving = True
            await link.send(self._want_frame)
            self._serving = True
            while True:
                frame = await link.next_frame()
                kind = frame.get("type")
                if kind == "reply" or kind == "pong":
                    self._pending.resolve(frame)
                elif kind == "sample":
                    try:
                        sample = parse_sample(frame, facts)
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
            self._serving = False
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
            elif self.state in ("connecting", "reconnecting") and self._was_serving and self._hello_at is not None:
                # A hello and then nothing usable (only truncated frames, say) must not read "connecting" for ever.
                since = max(self._hello_at, self.last_frame_at or 0.0)
                age = now - since
                if age > self.settings.stale_after:
                    self._set("stale", f"the probe said hello but sent no sample for {age:.0f}s"
                              + (f" ({link.junk_lines} lines that are not frames)" if link.junk_lines else ""))

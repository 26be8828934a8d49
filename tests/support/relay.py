"""A controllable TCP relay on loopback, for simulating dead or slow links.

The relay runs its own asyncio loop in a background thread, so its control
methods are plain (thread-safe, blocking for a few ms at most) calls usable
from sync tests and from async tests alike.

Modes, switchable at any time (they apply to existing and new connections):

  pass        forward bytes both ways (default)
  delay(s)    forward every chunk s seconds after it arrived (order kept)
  blackhole   keep connections open but silently drop all bytes both ways and
              never close (not even when a side closes); the stream is lost for good
  stall       stop reading (TCP back-pressure, nothing lost); bytes flow again
              once the mode is switched back: a link that heals
  refuse      new connections are accepted and closed at once (existing ones untouched)

and the one-shot action `cut()`: abort every current connection (both sides
see the connection reset); new connections are then handled per the mode.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from .net import check_loopback, free_port

MODES = ("pass", "delay", "blackhole", "stall", "refuse")


@dataclass(eq=False)
class _Conn:
    client_w: asyncio.StreamWriter
    upstream_w: asyncio.StreamWriter | None = None
    tasks: list = field(default_factory=list)
    closed: bool = False


class TcpRelay:
    """Relay listen_host:port -> target_host:target_port (all loopback)."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int | None = None,
    ):
        self.target_host = check_loopback(target_host)
        self.target_port = target_port
        self.host = check_loopback(listen_host)
        self.port = listen_port if listen_port is not None else free_port(listen_host)
        self._mode = "pass"
        self._delay = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Conn] = set()
        self._flowing: asyncio.Event | None = None
        self.total_connections = 0
        self.bytes_up = 0  # client -> target, delivered
        self.bytes_down = 0  # target -> client, delivered
        self.bytes_dropped = 0

    # ------------------------------------------------------------------ lifecycle

    def __repr__(self) -> str:
        return f"<TcpRelay {self.host}:{self.port} -> {self.target_host}:{self.target_port} mode={self.mode}>"

    @property
    def address(self) -> str:
        return self.host

    def start(self) -> "TcpRelay":
        if self._thread is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"relay-{self.port}", daemon=True)
        self._thread.start()
        self._call(self._astart())
        return self

    async def _astart(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._handle, self.host, self.port, reuse_address=True)

    def close(self) -> None:
        """Abort all connections, stop listening, stop the thread."""
        if self._thread is None:
            return
        try:
            self._call(self._aclose())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
            self._thread = None
            self._loop = None

    async def _aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._acut()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except asyncio.TimeoutError:
                pass
        self._server = None

    def __enter__(self) -> "TcpRelay":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, coro, timeout: float = 10.0):
        if self._loop is None:
            raise RuntimeError("relay is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ------------------------------------------------------------------ control

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def connection_count(self) -> int:
        return len(self._conns)

    def set_mode(self, mode: str, delay: float | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown relay mode {mode!r}; one of {MODES}")
        self._call(self._aset_mode(mode, delay))

    async def _aset_mode(self, mode: str, delay: float | None) -> None:
        self._mode = mode
        if mode == "delay":
            self._delay = float(delay or 0.0)
        elif mode == "pass":
            self._delay = 0.0
        if mode == "stall":
            self._flowing.clear()
        else:
            self._flowing.set()

    def pass_through(self) -> None:
        self.set_mode("pass")

    def delay(self, seconds: float) -> None:
        self.set_mode("delay", seconds)

    def blackhole(self) -> None:
        self.set_mode("blackhole")

    def stall(self) -> None:
        self.set_mode("stall")

    def refuse(self) -> None:
        self.set_mode("refuse")

    def cut(self) -> None:
        """Abort every current connection (both ends see it die)."""
        self._call(self._acut())

    async def _acut(self) -> None:
        for c in list(self._conns):
            self._abort(c)
        await asyncio.sleep(0)

    def wait_for_connections(self, n: int = 1, timeout: float = 5.0) -> None:
        """Wait until at least n connections are open through the relay."""
        deadline = time.monotonic() + timeout
        while self.connection_count < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self!r}: {self.connection_count} connections, wanted {n}")
            time.sleep(0.01)

    # ------------------------------------------------------------------ plumbing

    def _abort(self, c: _Conn) -> None:
        c.closed = True
        for w in (c.client_w, c.upstream_w):
            if w is not None:
                _set_linger0(w)
                w.transport.abort()
        for t in c.tasks:
            t.cancel()
        self._conns.discard(c)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.total_connections += 1
        if self._mode == "refuse":
            _set_linger0(client_w)
            client_w.transport.abort()
            return
        c = _Conn(client_w)
        self._conns.add(c)
        try:
            up_r, up_w = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            self._abort(c)
            return
        if c.closed:  # cut while connecting
            up_w.transport.abort()
            return
        c.upstream_w = up_w
        c.tasks = [
            asyncio.ensure_future(self._pump(c, client_r, up_w, "up")),
            asyncio.ensure_future(self._pump(c, up_r, client_w, "down")),
        ]
        try:
            await asyncio.gather(*c.tasks, return_exceptions=True)
        finally:
            if not c.closed:
                c.closed = True
                for w in (client_w, up_w):
                    try:
                        w.close()
                    except Exception:
                        pass
            self._conns.discard(c)

    async def _pump(self, c: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
        queue: asyncio.Queue = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(c, queue, writer, direction))
        c.tasks.append(sender)
        try:
            while True:
                await self._flowing.wait()
                try:
                    data = await reader.read(65536)
                except (ConnectionError, OSError):
                    data = b""
                if not data:
                    if self._mode == "blackhole":
                        # a blackhole never tells the other side anything
                        await asyncio.Event().wait()
                    await queue.put(None)
                    break
                while self._mode == "stall":
                    await self._flowing.wait()
                if self._mode == "blackhole":
                    self.bytes_dropped += len(data)
                    continue
                deliver_at = asyncio.get_running_loop().time() + (self._delay if self._mode == "delay" else 0.0)
                await queue.put((deliver_at, data))
            await sender
        finally:
            sender.cancel()

    async def _send(self, c: _Conn, queue: asyncio.Queue, writer: asyncio.StreamWriter, direction: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            item = await queue.get()
            if item is None:
                # peer closed its side: close the whole relayed connection (SSH never half-closes usefully)
                if not c.closed:
                    self._close_both(c)
                return
            deliver_at, data = item
            wait = deliver_at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if self._mode == "blackhole":
                self.bytes_dropped += len(data)
                continue
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                if not c.closed:
                    self._close_both(c)
                return
            if direction == "up":
                self.bytes_up += len(data)
            else:
                self.bytes_down += len(data)

    def _close_both(self, c: _Conn) -> None:
        c.closed = True
        for w in (c.client_w, c.upstream_w):
            if w is not None:
                try:
                    w.close()
                except Exception:
                    pass
        for t in c.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self._conns.discard(c)


def _set_linger0(w: asyncio.StreamWriter) -> None:
    """Make close() send RST (a hard cut) instead of FIN."""
    sock = w.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass

"""A small HTTP/1.1 server on the monitor's own event loop, answering GET /metrics.

The metrics text is prometheus-client's format (families.render: generate_latest's text, faster). It runs on the loop that feeds
the store, between two sample deliveries, so a scrape reads one consistent state with no lock (a
threaded server would read the store while the loop writes it).
"""

from __future__ import annotations

import asyncio

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from .families import render

MAX_REQUEST_HEAD = 16 * 1024
READ_TIMEOUT_S = 10.0
INDEX = b"gpuwatch exporter: metrics at /metrics\n"


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.scrapes = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_REQUEST_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]  # the real one when 0 was asked for

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: Prometheus reuses its connection scrape after scrape
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                        ConnectionError):
                    return
                except asyncio.CancelledError:
                    # the server is stopping: end this connection quietly (asyncio's stream callback
                    # would log a cancelled handler as an error)
                    return
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                parts = request_line.split()
                if len(parts) != 3:
                    await self._reply(writer, 400, b"bad request\n", "text/plain", close=True)
                    return
                method, target, _version = parts
                close = any(h.lower().replace(" ", "") == "connection:close" for h in header_lines)
                path = target.split("?", 1)[0]
                if method not in ("GET", "HEAD"):
                    await self._reply(writer, 405, b"only GET\n", "text/plain", close=True)
                    return
                if path == "/metrics":
                    self.scrapes += 1
                    body = render(self.registry)
                    await self._reply(writer, 200, body, CONTENT_TYPE_LATEST, close, head_only=method == "HEAD")
                elif path == "/":
                    await self._reply(writer, 200, INDEX, "text/plain", close, head_only=method == "HEAD")
                else:
                    await self._reply(writer, 404, b"not found: try /metrics\n", "text/plain", close)
                if close:
                    return
        finally:
            writer.close()

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str, close: bool,
                     head_only: bool = False) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}[status]
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n")
        writer.write(head.encode("latin-1") + (b"" if head_only else body))
        await writer.drain()

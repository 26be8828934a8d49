"""`gpuwatch export --listen HOST:PORT`: the headless core with /metrics, until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys

from prometheus_client import CollectorRegistry, ProcessCollector

from ..config import Config
from ..monitor import Monitor
from ..export.collector import GpuwatchCollector
from ..export.server import MetricsServer


def parse_listen(text: str) -> tuple[str, int]:
    """'127.0.0.1:9808', '[::1]:9808', ':9808' (every interface) -> (host, port); ValueError otherwise."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"expected HOST:PORT, e.g. 127.0.0.1:9808, got {text!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"expected a port from 0 to 65535, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if "[" in host or "]" in host:
        raise ValueError(f"expected HOST:PORT (an IPv6 address in brackets), got {text!r}")
    return host or "0.0.0.0", port


def build_registry(monitor: Monitor, ended_job_ttl: float) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuwatchCollector(monitor.store, monitor.tracker, ended_job_ttl))
    ProcessCollector(namespace="gpuwatch", registry=registry)  # gpuwatch's own CPU and memory
    return registry


async def serve_export(config: Config, host: str, port: int, stop: asyncio.Event,
                       started: asyncio.Event | None = None) -> MetricsServer:
    monitor = Monitor(config)
    server = MetricsServer(build_registry(monitor, config.export.ended_job_ttl), host, port)
    await server.start()  # a busy port is an error before any host is contacted
    try:
        await monitor.start()
        print(f"gpuwatch: serving metrics at http://{host}:{server.port}/metrics", file=sys.stderr, flush=True)
        if started is not None:
            started.set()
        await stop.wait()
    finally:
        await server.stop()
        await monitor.stop()
    return server


async def run_export(config: Config, host: str, port: int) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await serve_export(config, host, port, stop)
    except OSError as exc:
        print(f"gpuwatch: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2  # the command line's mistake (a port in use or not ours), as EXIT_CONFIG
    return 0

"""`gpuwatch`: the dashboard, and headless verbs on the same core (status, watch)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

from . import __version__
from .config import Config, load_config
from .errors import ConfigError
from .monitor import Monitor
from .status_table import render_status


def build_parser() -> argparse.ArgumentParser:
    config_help = "hosts file (default: $GPUWATCH_CONFIG, then hosts.toml in the user config dir; none: this machine)"
    # `gpuwatch --config F status` and `gpuwatch status --config F` both work: the verb's own
    # --config must not overwrite the one given before the verb with its default.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=config_help)
    parser = argparse.ArgumentParser(
        prog="gpuwatch",
        description="Watch GPU hosts over SSH and tell what each training job is doing.",
    )
    parser.add_argument("--config", metavar="FILE", default=None, help=config_help)
    parser.add_argument("--version", action="version", version=f"gpuwatch {__version__}")
    parser.add_argument("--readonly", action="store_true", help="never act on processes (kill, restart, dump)")
    parser.add_argument("--theme", help="theme name (e.g. gpuwatch-dark, gpuwatch-light, gpuwatch-high-contrast)")
    sub = parser.add_subparsers(dest="verb")
    status = sub.add_parser("status", parents=[common], help="print one snapshot and exit")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--window", type=float, default=None, metavar="S", help="sampling window in seconds (default: 2 sample intervals)")
    watch = sub.add_parser("watch", parents=[common], help="print one JSON object per sample interval until interrupted")
    watch.add_argument("--json", action="store_true", required=True, help="JSON lines (the only format)")
    watch.add_argument("--count", type=int, default=0, metavar="N", help="stop after N objects (default: run until interrupted)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"gpuwatch: config error: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        print(f"gpuwatch: warning: {warning}", file=sys.stderr)
    if args.verb == "status":
        try:
            return asyncio.run(run_status(config, args.json, args.window))
        except KeyboardInterrupt:  # Ctrl-C during the sampling window: the monitor has stopped
            return 130
    if args.verb == "watch":
        return asyncio.run(run_watch(config, args.count))
    return run_dashboard(config, args)


async def run_status(config: Config, as_json: bool, window: float | None) -> int:
    monitor = Monitor(config)
    await monitor.start()
    interval = config.settings.sample_interval
    try:
        await monitor.wait_settled(config.settings.connect_timeout + 5)
        # A second sample gives rates (CPU, log growth) something to compare against.
        await asyncio.sleep(window if window is not None else 2 * interval)
        await _wait_jobs_observed(monitor, max(5.0, 4 * interval))
        snapshot = monitor.snapshot()
    finally:
        await monitor.stop()
    if as_json:
        print(json.dumps(snapshot, indent=None))
    else:
        print(render_status(snapshot))
    return 0


async def _wait_jobs_observed(monitor: Monitor, limit: float) -> None:
    """A one-shot verdict needs each job's log read once and two CPU samples: a job first seen in
    the last frame of the window would otherwise print `unknown (observing)`. Wait up to `limit`."""
    ready = getattr(monitor.tracker, "ready", None)
    if ready is None:
        return
    deadline = time.monotonic() + limit
    while not all(ready(host) for host in monitor.sessions) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def run_watch(config: Config, count: int) -> int:
    monitor = Monitor(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await monitor.start()
    interval = config.settings.sample_interval
    emitted = 0
    try:
        await monitor.wait_settled(min(config.settings.connect_timeout, 3 * interval))
        next_at = time.monotonic()
        while not stop.is_set():
            try:
                sys.stdout.write(json.dumps(monitor.snapshot()) + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                break
            emitted += 1
            if count and emitted >= count:
                break
            next_at += interval
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
            except asyncio.TimeoutError:
                pass
    finally:
        await monitor.stop()
    return 0


def run_dashboard(config: Config, args: argparse.Namespace) -> int:
    try:
        from .ui.run import run_dashboard as run_ui
    except ImportError as exc:  # pragma: no cover - the UI ships with the package
        print(f"gpuwatch: dashboard unavailable ({exc}); try `gpuwatch status`", file=sys.stderr)
        return 1
    return run_ui(config, theme=args.theme, readonly=args.readonly or config.settings.readonly)


if __name__ == "__main__":
    sys.exit(main())

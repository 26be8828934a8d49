"""The verbs over recordings: `record`, `replay`, `demo`, and `report --recording F --at T`.

Each verb imports what it alone uses, where it runs: `record` and `report` never load Textual, and
`replay` never builds a Monitor."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

from ..recording.at_time import parse_at
from ..recording.format import RecordingError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _error(text: str) -> None:
    print(f"gpuwatch: {text}", file=sys.stderr)


async def run_record(config, path: str, count: int | None) -> int:
    """Record every host until interrupted (or `count` sample intervals); the file is closed properly."""
    from ..monitor import Monitor
    from ..recording.recorder import Recorder

    monitor = Monitor(config)
    recorder = Recorder(monitor, path)
    try:
        recorder.open()
    except RecordingError as exc:
        _error(f"record: {exc}")
        return EXIT_USAGE
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    await monitor.start()
    try:
        await monitor.wait_settled(min(config.settings.connect_timeout, 3 * config.settings.sample_interval))
        await recorder.run(config.settings.sample_interval, stop, count)
    finally:
        await monitor.stop()
        recorder.close()
    if recorder.failure is not None:  # a full disk: say so; what reached the disk replays
        _error(f"record: {recorder.failure}; what was written before replays (gpuwatch replay {path})")
        return EXIT_FAILED
    size = Path(path).stat().st_size
    print(f"gpuwatch: recorded {recorder.ticks} sample intervals over {time.monotonic() - started:.0f}s "
          f"into {path} ({size / 1024:.0f} KiB)", file=sys.stderr)
    return EXIT_OK


def load_timeline(path: str):
    from ..recording.timeline import Timeline

    timeline = Timeline.open(path)
    if not timeline.ticks:
        raise RecordingError(f"{path}: the recording holds no sample yet"
                             + (f" ({timeline.damage})" if timeline.damage else ""))
    return timeline


def run_replay(args) -> int:
    """`gpuwatch replay FILE` and `gpuwatch demo`: the dashboard on a recording."""
    from ..demo import demo_recording

    demo = args.verb == "demo"
    path = str(demo_recording()) if demo else args.file
    if not demo and Path(path).is_file():
        from ..incident_bundle import BundleError, is_bundle, open_bundle

        if is_bundle(path):
            try:
                manifest, recording, keep = open_bundle(path)  # keep: the temp dir lives while we replay
            except BundleError as exc:
                _error(f"replay: {exc}")
                return EXIT_USAGE
            if recording is None:
                _error(f"replay: {path}: the bundle holds no recording ({manifest.get('recording')})")
                return EXIT_USAGE
            _error(f"bundle: {manifest.get('job')} on {manifest.get('host')}, "
                   f"{len(manifest.get('dumps') or [])} dump(s); report.md and findings.json are inside")
            path = str(recording)
    try:
        timeline = load_timeline(path)
        start = parse_at(args.at, timeline.start, timeline.end) if getattr(args, "at", None) else None
    except RecordingError as exc:
        _error(f"{args.verb}: {exc}")
        return EXIT_USAGE
    if timeline.damage:
        _error(f"warning: {timeline.damage}")
    from ..ui.replay_app import run_replay_app

    return run_replay_app(timeline, theme=args.theme, speed=args.speed, playing=not getattr(args, "paused", False),
                          loop=demo, start=start)


def report_from_recording(path: str, at: str | None, host: str, job: str, directory: str | None,
                          lines: int, bundle_window: float | None = None) -> int:
    """`gpuwatch report HOST JOB --recording F [--at T] [--bundle]`: the incident report (or bundle) as of
    that instant."""
    from ..incident_bundle import BundleError, write_bundle
    from ..incident_report import ReportError, write_report
    from ..recording.timeline import Replay, ReplayMonitor

    try:
        timeline = load_timeline(path)
        t = parse_at(at, timeline.start, timeline.end) if at else timeline.end
    except RecordingError as exc:
        _error(f"report: {exc}")
        return EXIT_USAGE
    if timeline.damage:
        _error(f"warning: {timeline.damage}")
    replay = Replay(timeline, int((timeline.header.get("settings") or {}).get("history") or 120))
    replay.seek(t)
    try:
        if bundle_window is None:
            out = write_report(ReplayMonitor(replay), host, job, directory, lines, now=t)
        else:
            out = write_bundle(ReplayMonitor(replay), host, job, directory, recordings=[Path(path)],
                               window_s=bundle_window, now=t, log_lines=lines)
    except (ReportError, BundleError) as exc:
        _error(f"report: {exc}")
        return EXIT_FAILED
    print(out)
    return EXIT_OK


def recording_dashboard_source(config):
    """The live dashboard's source with a RollingRecorder attached (`[settings] record = "DIR"`)."""
    from ..monitor import Monitor
    from ..ui.monitor_source import MonitorSource
    from ..ui.run import user_themes_dir
    from ..recording.recorder import RollingRecorder

    monitor = Monitor(config)
    recorder = RollingRecorder(monitor, config.settings.record, config.settings.record_retention)
    recorder.themes_dir = user_themes_dir()
    recorder.attach()
    source = MonitorSource(monitor)
    source.watch_recording(recorder)
    return source, recorder

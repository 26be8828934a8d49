"""`gpuwatch`: the dashboard, and headless verbs on the same core (status, watch).

Each verb's modules (verbs/, ui/, monitor, alerts, slurm) are imported inside the function that runs
it, on purpose: `gpuwatch --help` and the dashboard's first frame load only what they use
(benchmarks/bench_ui_startup.py)."""

from __future__ import annotations

import gc

# Start-up creates ~100k objects that live as long as the process; collector passes over them while
# they are being made are ~10% of the start-up's work. Paused for these imports (restored below)
# and, for the dashboard, again until its first frame is on screen (GpuwatchApp resumes it).
_collector_was_on = gc.isenabled()
gc.disable()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from . import __version__  # noqa: E402
from .actions import registry  # noqa: E402
from .config import Config, load_config  # noqa: E402
from .errors import ConfigError  # noqa: E402
from .gc_policy import relax_gc  # noqa: E402
from .terminal_guard import guarded_output  # noqa: E402
from .vocab import HOST_OK_STATES, REPLAY_SPEEDS  # noqa: E402

if _collector_was_on:
    gc.enable()

if TYPE_CHECKING:
    from .monitor import Monitor

DEMO_SPEED = 10


# Exit codes, shared by every verb (and listed in `gpuwatch --help` and the README).
EXIT_OK = 0
EXIT_ACTION_FAILED = 1  # kill/restart/dump: the action failed or only partly worked; report: no such job
EXIT_CONFIG = 2  # config or command-line mistake (argparse uses 2 too); an action refused
EXIT_NOT_CONNECTED = 3  # `status`: at least one host is not connected; an action's host is not
EXIT_DOCTOR_FAILED = 4  # `doctor`: at least one check failed
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_CODES_TEXT = """exit codes:
  0    success (status: every host connected; kill/restart/dump/reap: done)
  1    kill/restart/dump/reap: the action failed or only partly worked (a kill that left processes
       behind); report: job not found, or the report could not be written
  2    config or command-line mistake; an action refused (read-only, not confirmed, no such job); a job
       name that several jobs share (kill/restart/dump/reap/report list them: name one by its id)
  3    status: at least one host (or the [slurm] login node) is not connected; kill/restart/dump/reap:
       the host is not connected
  4    doctor: at least one check failed
  130  interrupted (Ctrl-C)"""
MAX_WINDOW_S = 3600.0


def window_seconds(text: str) -> float:
    """--window: a finite number of seconds, more than 0 and at most an hour."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds as a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_WINDOW_S:
        raise argparse.ArgumentTypeError(f"expected seconds more than 0 and at most {MAX_WINDOW_S:g}, got {text!r}")
    return value


def positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more (leave --count out to run until interrupted), got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from .recording.at_time import AT_HELP  # the help text only; a dashboard start needs no parser

    config_help = "hosts file (default: $GPUWATCH_CONFIG, then hosts.toml in the user config dir; none: this machine)"
    theme_help = "theme name (e.g. gpuwatch-dark, gpuwatch-light, gpuwatch-high-contrast)"
    # `gpuwatch --config F status` and `gpuwatch status --config F` both work: the verb's own
    # options must not overwrite the ones given before the verb with their defaults.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=config_help)
    common.add_argument("--theme", metavar="NAME", default=argparse.SUPPRESS, help=theme_help)
    parser = argparse.ArgumentParser(
        prog="gpuwatch",
        description="Watch GPU hosts over SSH and tell what each training job is doing. "
        "Without a verb: the dashboard.",
        epilog=EXIT_CODES_TEXT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", metavar="FILE", default=None, help=config_help)
    parser.add_argument("-V", "--version", action="version", version=f"gpuwatch {__version__}")
    parser.add_argument("--readonly", action="store_true", help="never act on processes (kill, restart, dump)")
    parser.add_argument("--theme", metavar="NAME", default=None, help=theme_help)
    verbs = registry.cli_verbs()
    sub = parser.add_subparsers(dest="verb", metavar="VERB", title="verbs (without one: the dashboard)")
    status = sub.add_parser(
        "status", parents=[common], help="print one snapshot and exit",
        description="Connect to every host, sample for a short window, print one snapshot (a table, "
        "or JSON with --json) and exit. Exits 3 when a host is not connected.",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--window", type=window_seconds, default=None, metavar="S",
                        help=f"sampling window in seconds, more than 0 and at most {MAX_WINDOW_S:g} "
                        "(default: 2 sample intervals)")
    watch = sub.add_parser(
        "watch", parents=[common], help="print one JSON object per sample interval until interrupted",
        description="Print one JSON object per line (the same schema as `status --json`) every sample "
        "interval, until interrupted or --count objects were printed. JSON lines is the only format.",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    watch.add_argument("--json", action="store_true", help="JSON lines (the only format; accepted, not required)")
    watch.add_argument("--count", type=positive_count, default=None, metavar="N",
                       help="stop after N objects, N >= 1 (default: run until interrupted)")
    for verb, spec in verbs.items():
        p = sub.add_parser(
            verb, parents=[common], help=cli_help(spec),
            description=f"{spec.title}: {spec.description}. Shows the plan (host, job, processes, users, the "
            "exact command) and asks on a terminal; without one it refuses unless --yes. Every attempt is "
            "recorded in the audit log.",
            epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("host", metavar="HOST", help="a host name from the config")
        p.add_argument("job", metavar="JOB", help="the job's name as `gpuwatch status` shows it, or its id")
        p.add_argument("--yes", action="store_true", help="do it without asking")
        p.add_argument("--json", action="store_true", help="print the outcome as JSON")
        p.add_argument("--readonly", action="store_true", default=argparse.SUPPRESS,
                       help="refuse (as the dashboard's --readonly does)")
        if spec.name == "dump_stack":
            p.add_argument("--native", action="store_true", default=None, help="include native (C/C++) frames")
    watch.add_argument("--alerts", action="store_true",
                       help="run the [alerts] rules headless: print one JSON line per alert (instead of "
                       "snapshots) and send each to its sinks (bell/desktop go to the controlling terminal)")
    from .verbs.scancel import add_parser as add_scancel_parser

    add_scancel_parser(sub, common, EXIT_CODES_TEXT)
    doctor = sub.add_parser(
        "doctor", parents=[common], help="check every host: SSH, probe, GPU source, py-spy, ptrace, limits",
        description="Per host: reachability, host key, authentication, the remote Python, the GPU source, "
        "py-spy, ptrace permission, SSH channel headroom (MaxSessions) and clock skew. Each check passes, "
        "warns or fails with what to do. Exits 4 when a check failed.",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report = sub.add_parser(
        "report", parents=[common], help="write an incident report (Markdown) for one job and print its path",
        description="Watch for a short window, then write one Markdown file about JOB on HOST: verdict, "
        "evidence, phase history, GPU sparklines, the last log lines, the process tree, the latest py-spy "
        "dump, host facts. Prints the file's path. Exits 1 when the job is not found or the file cannot "
        "be written.", epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("host", help="host name from the config")
    report.add_argument("job", help="job name (or id) as `status` shows it")
    report.add_argument("--dir", default=None, metavar="DIR", help="where to write (default: the state dir's reports/)")
    report.add_argument("--lines", type=positive_count, default=60, metavar="N", help="log lines to include")
    report.add_argument("--bundle", action="store_true",
                        help="write an incident bundle (one .zip: the report, the recording of the window, every "
                        "dump with its grouping, flight-recorder and NCCL RAS findings; secrets redacted); "
                        "`gpuwatch replay BUNDLE` opens it")
    report.add_argument("--window", type=positive_count, default=600, metavar="S",
                        help="with --bundle: the seconds before now (or --at) it covers (default: 600)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output (schema in the README)")
    record = sub.add_parser(
        "record", parents=[common], help="record every host and job into FILE (.jsonl.gz) until interrupted",
        description="Watch every host as the dashboard does and write a recording: host states, every GPU "
        "sample, process facts, job verdicts with evidence and history, log lines as they arrived. "
        "`gpuwatch replay FILE` opens the dashboard on it.",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    record.add_argument("file", metavar="FILE", help="a new file, e.g. night.jsonl.gz (gzip'd unless it ends otherwise)")
    record.add_argument("--count", type=positive_count, default=None, metavar="N",
                        help="stop after N sample intervals (default: until interrupted)")
    replay = sub.add_parser(
        "replay", parents=[common], help="open the dashboard on a recording (play, pause, speed, seek)",
        description="The dashboard on a recording made by `gpuwatch record` or `[settings] record`: space "
        "plays/pauses, +/- change the speed (1x-60x), [ ] jump a minute, { } ten minutes, < > to the "
        "previous/next phase change (all in the help, ?). Actions on hosts are disabled.",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("file", metavar="FILE", help="a recording (.jsonl.gz)")
    replay.add_argument("--at", default=None, metavar="TIME", help="start there: " + AT_HELP)
    replay.add_argument("--speed", type=int, default=1, choices=REPLAY_SPEEDS, help="start at this speed (default: 1)")
    replay.add_argument("--paused", action="store_true", help="start paused")
    demo = sub.add_parser(
        "demo", parents=[common], help="the dashboard on a bundled recording of real H200 runs (no GPU needed)",
        description="Replays a recording bundled with gpuwatch, made on real H200 GPUs (torch.compile's first "
        "compile, buffered stdout, a Python hang, an NCCL hang), looping. Same keys as `replay`. Its verdicts were "
        "judged at stall_after = 30 s (the default is 5 min, the ceiling for a job with no rhythm of its own "
        "yet; a job that logged steps is judged on its own rhythm: a hang about a minute after its last step).",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--speed", type=int, default=DEMO_SPEED, choices=REPLAY_SPEEDS,
                      help=f"replay speed (default: {DEMO_SPEED})")
    report.add_argument("--recording", default=None, metavar="FILE",
                        help="report from a recording instead of the live hosts (with --at)")
    report.add_argument("--at", default=None, metavar="TIME", help="with --recording: when (" + AT_HELP + "; default: end)")
    export = sub.add_parser(
        "export", parents=[common], help="serve hosts, GPUs and job verdicts as Prometheus metrics",
        description="Watch every host as the dashboard does and serve /metrics (Prometheus text format) "
        "at --listen until interrupted. Scrape it with honor_labels: true (the `job` label is the training job).",
        epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("--listen", type=listen_address, required=True, metavar="HOST:PORT",
                        help="address to serve on, e.g. 127.0.0.1:9808 (:9808 for every interface)")
    sub.metavar = "{" + ",".join(sub.choices) + "}"  # every verb, in the order they are listed below
    return parser


def cli_help(spec) -> str:
    """An action's one line for `gpuwatch --help`: the registry's words, about a job rather than the
    dashboard's selected one."""
    return spec.description.replace("the selected job", "a job")


def listen_address(text: str) -> tuple[str, int]:
    from .verbs.export import parse_listen

    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_theme(name: str) -> str | None:
    """None when the theme exists; else the error line naming the available themes."""
    # Theme files are parsed by the UI package (it imports textual): only when --theme is given.
    from .ui.run import user_themes_dir
    from .ui.theme_files import load_themes

    themes = load_themes(user_themes_dir()).themes
    if name in themes:
        return None
    return f"gpuwatch: unknown theme {name!r}; available: {', '.join(sorted(themes))}"


# The dashboard's own options: what `gpuwatch` is most often started with.
_DASHBOARD_VALUE_OPTIONS = ("--config", "--theme")


def dashboard_args(argv: list[str]) -> argparse.Namespace | None:
    """The parsed arguments of a plain dashboard start (`--config F`, `--theme T`, `--readonly`, in
    any order, `--opt=value` too), exactly as build_parser() gives them; None for anything else
    (a verb, help, an abbreviation, a value that looks like an option), which then goes through
    the full parser. Building that parser (every verb's subparser, and the Slurm verb's import)
    is ~15 ms of the dashboard's start-up."""
    args = argparse.Namespace(config=None, readonly=False, theme=None, verb=None)
    tokens = iter(argv)
    for token in tokens:
        name, eq, value = token.partition("=")
        if token == "--readonly":
            args.readonly = True
        elif name in _DASHBOARD_VALUE_OPTIONS:
            if not eq:
                value = next(tokens, None)
                if value is None or value.startswith("-"):
                    return None  # argparse's error message, not ours
            setattr(args, name[2:], value)
        else:
            return None
    return args


def main(argv: list[str] | None = None) -> int:
    relax_gc()
    argv = sys.argv[1:] if argv is None else list(argv)
    # Everything a verb prints passes the sanitiser (the dashboard draws through its own stream).
    with guarded_output():
        return _main(argv)


def _main(argv: list[str]) -> int:
    args = dashboard_args(argv) or build_parser().parse_args(argv)
    if args.theme is not None:
        problem = check_theme(args.theme)
        if problem:
            print(problem, file=sys.stderr)
            return EXIT_CONFIG
    if args.verb in ("replay", "demo"):  # a recording needs no hosts file
        from .verbs.recording import run_replay

        return run_replay(args)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"gpuwatch: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if any(not s.hosts for s in config.sources):
        # The hosts of a source without a `hosts` list are the ones Prometheus has series for now.
        from .feeds.prometheus_discovery import with_discovered_hosts  # httpx only when a source needs it

        config = with_discovered_hosts(config)
    for warning in config.warnings:
        print(f"gpuwatch: warning: {warning}", file=sys.stderr)
    if args.verb == "status":
        try:
            return asyncio.run(run_status(config, args.json, args.window))
        except KeyboardInterrupt:  # Ctrl-C during the sampling window: the monitor has stopped
            return EXIT_INTERRUPTED
    if args.verb == "report" and args.at and not args.recording:
        print("gpuwatch: report: --at needs --recording FILE", file=sys.stderr)
        return EXIT_CONFIG
    if args.verb == "report" and args.recording:
        from .verbs.recording import report_from_recording

        return report_from_recording(args.recording, args.at, args.host, args.job, args.dir, args.lines,
                                     bundle_window=args.window if args.bundle else None)
    if args.verb == "record":
        from .verbs.recording import run_record

        return asyncio.run(run_record(config, args.file, args.count))
    if args.verb == "report":
        return asyncio.run(run_report(config, args.host, args.job, args.dir, args.lines,
                                      args.window if args.bundle else None))
    if args.verb == "doctor":
        return asyncio.run(run_doctor_verb(config, args.json))
    if args.verb == "watch" and args.alerts:
        if not config.alerts.enabled:
            print("gpuwatch: config error: watch --alerts needs rules: add [[alerts.rules]] or "
                  "`alerts = [...]` in a [[jobs]] table", file=sys.stderr)
            return EXIT_CONFIG
        return asyncio.run(run_watch_alerts(config, args.count))
    if args.verb == "watch":
        return asyncio.run(run_watch(config, args.count))
    spec = registry.cli_verbs().get(args.verb or "")
    if spec is not None:
        from .verbs.action import run_action

        try:
            return asyncio.run(run_action(
                config, spec, args.host, args.job, yes=args.yes, readonly=args.readonly or config.settings.readonly,
                as_json=args.json, native=getattr(args, "native", None)))
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
    if args.verb == "scancel":
        from .verbs.scancel import run_scancel

        return asyncio.run(run_scancel(config, args, readonly=args.readonly or config.settings.readonly))
    if args.verb == "export":
        from .verbs.export import run_export  # prometheus-client only for this verb

        return asyncio.run(run_export(config, *args.listen))
    return run_dashboard(config, args)


def status_exit_code(snapshot: dict) -> int:
    """0 when every host is connected, else 3 (a script can tell `status` found trouble)."""
    hosts = snapshot.get("hosts") or []
    return EXIT_OK if all(h.get("state") in HOST_OK_STATES for h in hosts) else EXIT_NOT_CONNECTED


async def run_status(config: Config, as_json: bool, window: float | None) -> int:
    from .monitor import Monitor
    from .status_table import render_status

    slurm = None
    if config.slurm is not None:  # the queue first: the nodes of running jobs are watched too
        from .verbs.slurm_status import read_slurm

        config, slurm = await read_slurm(config)
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
    if slurm is not None:
        snapshot["slurm"] = slurm.to_json()
    if as_json:
        print(json.dumps(snapshot, indent=None))
    else:
        text = render_status(snapshot)
        if slurm is not None:
            from .verbs.slurm_status import render_slurm

            text += "\n" + "\n".join(render_slurm(snapshot["slurm"], snapshot["time"]))
        print(text)
    if slurm is not None and snapshot["slurm"]["error"]:
        return EXIT_NOT_CONNECTED  # the login node did not answer: like a host that is not connected
    return status_exit_code(snapshot)


async def _wait_jobs_observed(monitor: Monitor, limit: float) -> None:
    """A one-shot verdict needs each job's log read once and two CPU samples: a job first seen in
    the last frame of the window would otherwise print `unknown (observing)`. Wait up to `limit`."""
    ready = monitor.tracker.ready
    deadline = time.monotonic() + limit
    while not all(ready(host) for host in monitor.sessions) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def run_watch(config: Config, count: int | None) -> int:
    from .monitor import Monitor

    slurm = None
    if config.slurm is not None:  # as `status`: the queue first, its running jobs' nodes watched too
        from .verbs.slurm_status import read_slurm

        config, slurm = await read_slurm(config)
    monitor = Monitor(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await monitor.start()
    poller = _start_slurm_poller(config, slurm, monitor) if slurm is not None else None
    interval = config.settings.sample_interval
    emitted = 0
    try:
        await monitor.wait_settled(min(config.settings.connect_timeout, 3 * interval))
        # As `status`: the first line judges each job once its log was read and its CPU rate measured, so it
        # never says `unknown (observing)` where `status` at that moment gives a verdict.
        await _wait_jobs_observed(monitor, max(5.0, 4 * interval))
        next_at = time.monotonic()
        while not stop.is_set():
            snapshot = monitor.snapshot()
            if slurm is not None:
                snapshot["slurm"] = slurm.to_json()  # the same object as `status --json`'s
            try:
                sys.stdout.write(json.dumps(snapshot) + "\n")
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
        if poller is not None:
            await poller.stop()
        await monitor.stop()
    return 0


def _start_slurm_poller(config: Config, watch, monitor: Monitor):
    """Re-read the queue every poll_interval; jobs that start later get their nodes and scripts watched."""
    from .slurm.hosts import adopt_new_jobs
    from .slurm.poller import SlurmPoller

    known_jobs = {j.name for j in config.jobs}
    poller = SlurmPoller(watch, config.slurm.poll_interval,
                         lambda: adopt_new_jobs(monitor, config.slurm, watch.running(), known_jobs))
    poller.start()
    return poller


async def run_watch_alerts(config: Config, count: int | None) -> int:
    """`watch --alerts`: the rules headless; stdout carries one JSON object per alert, --count of them."""
    from .alerts import AlertRunner, build_sinks, terminal_writer
    from .monitor import Monitor

    monitor = Monitor(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    printed = 0

    def print_event(event) -> None:
        nonlocal printed
        try:
            sys.stdout.write(json.dumps(event.to_json()) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            stop.set()
        printed += 1
        if count and printed >= count:
            stop.set()

    runner = AlertRunner(monitor, config.alerts, build_sinks(config.alerts, write=terminal_writer()),
                         on_event=print_event, tick_s=min(1.0, config.settings.sample_interval))
    await monitor.start()
    runner.start()
    try:
        await stop.wait()
    finally:
        await runner.stop()
        await monitor.stop()
    return EXIT_OK


async def run_report(config: Config, host: str, job: str, directory: str | None, lines: int,
                     bundle_window: float | None = None) -> int:
    from .incident_bundle import BundleError, write_bundle
    from .incident_report import ReportError, write_report
    from .jobs.job_lookup import AmbiguousJob
    from .monitor import Monitor

    if host not in {h.name for h in config.hosts}:
        print(f"gpuwatch: no host named {host!r} in the config", file=sys.stderr)
        return EXIT_CONFIG
    monitor = Monitor(config)
    await monitor.start()
    try:
        await monitor.wait_settled(config.settings.connect_timeout + 5)
        await asyncio.sleep(2 * config.settings.sample_interval)
        await _wait_jobs_observed(monitor, max(5.0, 4 * config.settings.sample_interval))
        try:
            if bundle_window is None:
                path = write_report(monitor, host, job, directory, lines)
            else:
                from pathlib import Path

                from .recording.recorder import FILE_GLOB

                kept = sorted(Path(config.settings.record).expanduser().glob(FILE_GLOB)) if config.settings.record else []
                path = write_bundle(monitor, host, job, directory, recordings=kept, window_s=bundle_window,
                                    log_lines=lines)
        except AmbiguousJob as exc:
            print(f"gpuwatch: report: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        except (ReportError, BundleError) as exc:
            print(f"gpuwatch: report: {exc}", file=sys.stderr)
            return 1
    finally:
        await monitor.stop()
    print(path)
    return EXIT_OK


async def run_doctor_verb(config: Config, as_json: bool) -> int:
    import shutil

    from .verbs.doctor import doctor_failed, doctor_json, render_doctor, run_doctor

    reports = await run_doctor(config)
    # On a terminal, long lines wrap at words (a fingerprint stays whole); piped, one line per check.
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    print(json.dumps(doctor_json(reports)) if as_json else render_doctor(reports, width))
    return EXIT_DOCTOR_FAILED if doctor_failed(reports) else EXIT_OK


def run_dashboard(config: Config, args: argparse.Namespace) -> int:
    collector_was_on = gc.isenabled()
    gc.disable()  # until the first frame (see the top of this file); the app turns it back on
    try:
        from .ui.run import run_dashboard as run_ui

        readonly = args.readonly or config.settings.readonly
        if config.settings.record:  # `[settings] record = "DIR"`: keep a rolling recording
            from .verbs.recording import recording_dashboard_source

            source, recorder = recording_dashboard_source(config)
            try:
                return run_ui(source, theme=args.theme or config.settings.theme, readonly=readonly,
                              history=config.settings.history, themes_dir=recorder.themes_dir)
            finally:
                recorder.close()
        return run_ui(config, theme=args.theme, readonly=readonly)
    finally:
        if collector_was_on:
            gc.enable()


if __name__ == "__main__":
    sys.exit(main())

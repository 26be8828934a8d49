"""The gpuwatch process's own cost per host-sample, without the UI: 128 hosts x 8 GPUs x 8 jobs.

1. Record: a real probe (8 GPUs from the nvidia-smi stand-in, 8 real jobs each with a child and
   a tailed log, see bench_fleet_jobs.py) is driven by a real JobTracker (its wants sent back to
   the probe, as a host session does) and its raw JSON lines are kept.
2. Replay: a Monitor (store + tracker + feeds, never started) for `--hosts` hosts gets each
   recorded line as a host session would hand it on: decode_frame (orjson) -> parse_sample ->
   Monitor.host_sample (store, tracker update, wants pushed to the feed). The log-tail keys are
   renamed to each host's own (the tracker numbers them per job). Twice per round, half a second
   apart, as the dashboard does, every JobView is built (`tracker.views`). The monitor's clock is simulated at
   1 Hz (round r at t0 + r s) and each frame's time (and its tails' mtimes) put on it, as from a live
   probe on a host whose clock agrees: rounds run back to back, but what the tracker keeps or
   judges again over time (timers, refreshes every few seconds) sees a 1 Hz fleet.
Measured: process CPU time (time.process_time) per host-sample, split into the frame parse, the
sink (store + tracker + wants) and the views; CPU share of one core at 1 Hz; RSS at the end.

    python benchmarks/bench_core_fleet.py [--hosts 128] [--frames 40] [--repeats 3] [--json OUT]
    python benchmarks/bench_core_fleet.py --profile   # one replay under cProfile, top functions
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

from bench_fleet_jobs import JobFleet, send

from gpuwatch_tui.config import load_config_file
from gpuwatch_tui.gc_policy import relax_gc
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui import monitor as monitor_module
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.feeds.probe_frames import FactCache, parse_sample
from gpuwatch_tui.transport.frame_decode import decode_frame


def record(frames: int, interval: float, lines_per_s: float) -> list[str]:
    """Raw sample lines from a real probe whose wants a real tracker sets."""
    with tempfile.TemporaryDirectory(prefix="gpuwatch-core-rec-") as tmp:
        fleet = JobFleet(Path(tmp), lines_per_s=lines_per_s)
        try:
            time.sleep(1.0)
            probe = fleet.start_probe(interval)
            tracker = JobTracker()
            facts = FactCache()  # the probe sends fixed process facts only when they change
            lines: list[str] = []
            sent = None
            warmup = 6  # discovery holds new jobs two frames while it asks for parents; logs follow
            while len(lines) < frames:
                line = probe.stdout.readline().decode()
                frame = json.loads(line)
                if frame.get("type") != "sample":
                    continue
                tracker.update("rec", parse_sample(frame, facts), time.time())
                w = tracker.wanted("rec")
                want = {"op": "want", "pids": w.pids, "tails": w.tails, "dirs": w.dirs, "matches": w.matches}
                if want != sent:
                    send(probe, want)
                    sent = want
                if warmup:
                    warmup -= 1
                    lines.append(line)  # the first frames too: discovery's work is part of the cost
                    continue
                lines.append(line)
            probe.stdin.close()
            probe.wait(timeout=10)
            return lines
        finally:
            fleet.stop()


def fleet_config(base: Path, hosts: int):
    text = ["[settings]", "sample_interval = 1.0", "history = 60", ""]
    for i in range(hosts):
        text += ["[[hosts]]", f'name = "host-{i:03d}"', "local = true", ""]
    path = base / "hosts.toml"
    path.write_text("\n".join(text))
    return load_config_file(path)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class SimulatedClock:
    """`time` for the monitor module: `time()` reads the replay's simulated clock."""

    def __init__(self, start: float) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


async def replay(lines: list[str], hosts: int, base: Path) -> dict:
    monitor = Monitor(fleet_config(base, hosts))
    clock_1hz = SimulatedClock(time.time())
    monitor_module.time = clock_1hz
    names = list(monitor.sessions)
    # The recording tracker's tail keys -> each host's own, by path (found after the host's first frames).
    rec_key_path: dict[str, str] = {}
    for line in lines:
        for t in json.loads(line).get("tails", []):
            if "path" in t:  # sent when new or changed (the probe leaves out what did not change)
                rec_key_path[t["key"]] = t["path"]
    host_keys: dict[str, dict[str, str]] = {n: {} for n in names}
    host_facts = {n: FactCache() for n in names}  # as each host session keeps one per probe run
    parse_s = sink_s = views_s = 0.0
    samples = 0
    gc.collect()
    rss_start = rss_mb()
    clock = time.process_time
    for r, line in enumerate(lines):
        clock_1hz.now += 1.0
        for name in names:
            t0 = clock()
            frame = decode_frame(line)  # as the host session reads a probe line
            frame["t"] = clock_1hz.now
            keys = host_keys[name]
            for t in frame.get("tails", ()):
                t["key"] = keys.get(rec_key_path.get(t["key"], ""), "unwanted")
                if t.get("mtime") is not None:
                    t["mtime"] = clock_1hz.now - 0.5
            sample = parse_sample(frame, host_facts[name])
            t1 = clock()
            monitor.host_sample(name, sample)
            t2 = clock()
            parse_s += t1 - t0
            sink_s += t2 - t1
            samples += 1
            if len(keys) < len(rec_key_path):
                keys.update({path: key for key, path in monitor.tracker.wanted(name).tails.items()})
        t0 = clock()
        await asyncio.sleep(0)  # the wants pushed to the feeds run here
        sink_s += clock() - t0
        for half in (0.0, 0.5):  # the dashboard builds the views at most twice a second, at its own times
            t0 = clock()
            views = monitor.tracker.views(clock_1hz.now + half)
            views_s += clock() - t0
    phases: dict[str, int] = {}
    for v in views:
        phases[v.phase] = phases.get(v.phase, 0) + 1
    per = 1000 * (parse_s + sink_s + views_s) / samples
    return {
        "host_samples": samples, "jobs": len(views), "phases_at_end": phases,
        "ms_per_host_sample": round(per, 3),
        "parse_ms": round(1000 * parse_s / samples, 3), "sink_ms": round(1000 * sink_s / samples, 3),
        "views_ms": round(1000 * views_s / samples, 3),
        "cpu_share_of_one_core_at_1hz": round(per * hosts / 1000, 3),
        "rss_mb_start": round(rss_start, 1), "rss_mb_end": round(rss_mb(), 1),
    }


def main() -> int:
    relax_gc()  # as the gpuwatch command does at start
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=128)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--interval", type=float, default=1.0, help="the recording probe's sample interval")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--log-lines-per-s", type=float, default=1.0, help="each job's log lines per second")
    ap.add_argument("--recording", help="reuse (or write) the recorded lines here")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()
    rec = Path(args.recording) if args.recording else None
    if rec is not None and rec.exists():
        lines = rec.read_text().splitlines(keepends=True)[: args.frames]
    else:
        print(f"recording {args.frames} frames...", file=sys.stderr, flush=True)
        lines = record(args.frames, args.interval, args.log_lines_per_s)
        if rec is not None:
            rec.write_text("".join(lines))
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpuwatch-core-") as tmp:
        for i in range(1 if args.profile else args.repeats):
            if args.profile:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
                runs.append(asyncio.run(replay(lines, args.hosts, Path(tmp))))
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(30)
            else:
                runs.append(asyncio.run(replay(lines, args.hosts, Path(tmp))))
            print(f"  run {i}: {runs[-1]}", file=sys.stderr, flush=True)
    per = sorted(r["ms_per_host_sample"] for r in runs)
    result = {
        "note": "measured on 2 shared CPU cores (other work running): process CPU time, not wall time",
        "hosts": args.hosts, "gpus_per_host": 8, "jobs_per_host": 8, "frames_per_host": len(lines),
        "log_lines_per_job_per_s": args.log_lines_per_s,  # as recorded (--recording: when it was written)
        "frame_bytes_mean": round(sum(len(x) for x in lines) / len(lines)),
        "runs": runs,
        "ms_per_host_sample_median": per[len(per) // 2], "ms_per_host_sample_min": per[0],
        "ms_per_host_sample_max": per[-1],
        "cpu_share_of_one_core_at_1hz_median": round(per[len(per) // 2] * args.hosts / 1000, 3),
        "rss_mb_max": max(r["rss_mb_end"] for r in runs),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

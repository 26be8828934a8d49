"""The job tracker's memory once every job has been watched for a full window (15 minutes at 1 Hz):
the fleet benchmark replays 20 frames, so its jobs hold 20 samples; this replays a recording (see
bench_core_fleet.py --recording) over and over on a simulated 1 Hz clock, for a few hosts, and scales
the growth to the fleet.

    python benchmarks/bench_core_memory.py --recording REC [--hosts 16] [--frames 960] [--fleet-hosts 128]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from bench_core_fleet import rss_mb

from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.feeds.probe_frames import FactCache, parse_sample


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recording", required=True)
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--frames", type=int, default=960)
    ap.add_argument("--fleet-hosts", type=int, default=128)
    args = ap.parse_args()
    lines = Path(args.recording).read_text().splitlines()
    tracker = JobTracker()
    names = [f"host-{i:03d}" for i in range(args.hosts)]
    facts = {n: FactCache() for n in names}
    # A tail's path is sent when new or changed (the probe leaves out what did not change).
    rec_key_path = {t["key"]: t["path"] for line in lines for t in json.loads(line).get("tails", []) if "path" in t}
    host_keys: dict[str, dict[str, str]] = {n: {} for n in names}
    gc.collect()
    rss_start = rss_mb()
    t0 = time.time()
    cpu0 = time.process_time()
    for k in range(args.frames):
        now = t0 + k
        # The first pass as recorded (discovery), then the steady frames again and again.
        line = lines[k] if k < len(lines) else lines[6 + (k - 6) % (len(lines) - 6)]
        for name in names:
            frame = json.loads(line)
            frame["t"] = now
            keys = host_keys[name]
            for t in frame.get("tails", ()):
                t["key"] = keys.get(rec_key_path.get(t["key"], ""), "unwanted")
                if t.get("mtime") is not None:
                    t["mtime"] = now - 0.5
            tracker.update(name, parse_sample(frame, facts[name]), now)
            if len(keys) < len(rec_key_path):
                keys.update({path: key for key, path in tracker.wanted(name).tails.items()})
    cpu = time.process_time() - cpu0
    gc.collect()
    rss_end = rss_mb()
    jobs = len(tracker.states())
    samples = sum(len(j.samples) for j in tracker.states())
    scale = args.fleet_hosts / args.hosts
    print(json.dumps({
        "hosts": args.hosts, "frames": args.frames, "jobs": jobs, "samples_kept_per_job": round(samples / jobs, 1),
        "rss_mb_start": round(rss_start, 1), "rss_mb_end": round(rss_end, 1),
        "rss_mb_at_fleet_estimate": round(rss_start + (rss_end - rss_start) * scale, 1),
        "fleet_hosts": args.fleet_hosts,
        "ms_per_host_sample_tracker_only": round(1000 * cpu / (args.frames * args.hosts), 3),
        "phases": sorted({j.verdict.phase for j in tracker.states() if j.verdict}),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Instructions per host-sample of bench_core_fleet's replay on steady frames: a figure that does not move
with the load of a shared machine (its CPU times do, by 10-20 %).

The replay of the first N frames and of the first 2N frames of a recording (same hosts, same process
setup) each run under valgrind's callgrind; their difference, divided by hosts x N, is the cost of
frames N..2N-1 alone: start-up, imports and discovery's first frames cancel out.

    python benchmarks/bench_core_steady_instr.py --recording REC [--hosts 8] [--frames 10] [--mode sink]

Modes: `parse` (json.loads and parse_sample only: the monitor takes nothing), `sink` (parse + store,
tracker, wants; no views), `all` (with the views, twice per round as the fleet bench builds them).
Needs `valgrind` on the PATH; runs two processes of a few tens of seconds each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child(recording: str, hosts: int, frames: int, mode: str) -> None:
    """One replay of the first `frames` frames (run under callgrind by the parent)."""
    import bench_core_fleet as fleet

    from gpuwatch_tui.gc_policy import relax_gc
    from gpuwatch_tui.jobs.tracker import JobTracker
    from gpuwatch_tui.monitor import Monitor

    relax_gc()
    if mode in ("parse", "sink"):
        JobTracker.views = lambda self, now=None, joined=True: []
    if mode == "parse":
        Monitor.host_sample = lambda self, host, sample: None
    lines = Path(recording).read_text().splitlines(keepends=True)[:frames]
    with tempfile.TemporaryDirectory(prefix="gpuwatch-instr-") as tmp:
        asyncio.run(fleet.replay(lines, hosts, Path(tmp)))


def _instructions(args, frames: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0",
           "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, str(Path(__file__)),
           "--child", "--recording", args.recording, "--hosts", str(args.hosts), "--frames", str(frames),
           "--mode", args.mode]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
    m = re.search(r"Collected : (\d+)", out)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out[-2000:]}")
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recording", required=True, help="a bench_core_fleet recording (at least 2 x --frames lines)")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--frames", type=int, default=10, help="N: frames N..2N-1 are measured")
    ap.add_argument("--mode", choices=("parse", "sink", "all"), default="sink")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.recording, args.hosts, args.frames, args.mode)
        return 0
    if len(Path(args.recording).read_text().splitlines()) < 2 * args.frames:
        raise SystemExit(f"{args.recording} has fewer than {2 * args.frames} frames")
    first, both = _instructions(args, args.frames), _instructions(args, 2 * args.frames)
    per = (both - first) / (args.hosts * args.frames)
    print(f"{args.mode}: {per / 1000:.1f}k instructions per host-sample "
          f"(frames {args.frames}-{2 * args.frames - 1}, {args.hosts} hosts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

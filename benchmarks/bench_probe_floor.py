"""The floor under the probe's CPU per sample on this host: a Python process that does nothing but what
every probe sample must (wake at a 1 Hz tick, write one frame-sized JSON line to its pipe, sleep), with a
thread blocked on stdin as the probe's request reader is. Its CPU per tick, from the scheduler's
per-thread figures (/proc/PID/task/*/schedstat, as bench_probe_cost reads the probe's), is what no
change to the probe's sampling can take away.

    python benchmarks/bench_probe_floor.py [--ticks 30] [--interval 1.0] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from bench_probe_cost import run_seconds

LOOP = r"""
import json, sys, threading, time
interval = float(sys.argv[1])
with_reader = sys.argv[2] == "reader"
if with_reader:
    t = threading.Thread(target=sys.stdin.buffer.readline, daemon=True)
    t.start()
frame = {"type": "sample", "gpus": [{"index": i, "util_pct": 97, "mem_used_mib": 81234.5} for i in range(8)],
         "procs": [{"pid": 1000 + i, "state": "R", "cpu_s": 12.5, "children": []} for i in range(8)]}
next_tick = time.time()
while True:
    frame["t"] = time.time()
    sys.stdout.buffer.write((json.dumps(frame, separators=(",", ":")) + "\n").encode())
    sys.stdout.buffer.flush()
    next_tick += interval
    time.sleep(max(0.0, next_tick - time.time()))
"""


def floor(ticks: int, interval: float, reader: bool) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", LOOP, str(interval), "reader" if reader else "plain"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for _ in range(3):
            proc.stdout.readline()
        start = run_seconds(proc.pid)
        for _ in range(ticks):
            proc.stdout.readline()
        used = run_seconds(proc.pid) - start
    finally:
        proc.kill()
        proc.wait()
    return {"ticks": ticks, "interval_s": interval, "reader_thread": reader,
            "cpu_us_per_tick": round(1e6 * used / ticks, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    result = {"what": "CPU per tick of a process that only wakes, writes a frame-sized line and sleeps",
              "runs": [floor(args.ticks, args.interval, reader) for reader in (False, True)]}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

"""The phase engine's cost per judgment at steady state: a job watched for a full window
(judging.WINDOW_S of 1 Hz resource samples, as a job keeps after 15 minutes), one GPU training, the
log growing every second. The fleet benchmark replays 20 frames only, so its jobs hold 20 samples;
this shows what a long-watched job costs.

    python benchmarks/bench_engine_window.py [--samples 900] [--repeats 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from gpuwatch_tui.jobs.observation import GpuReading, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import infer_phase


def observation(n: int, now: float) -> JobObservation:
    samples = [
        ResourceSample(time=now - n + 1 + i, cpu_s=100.0 + 1.05 * i, children_cpu_s=5.0 + 0.1 * i,
                       gpus=(GpuReading(0, 98.0, 70_000.0, 690.0, 700.0),), states=("R",),
                       rank_cpu_s=((101, 100.0 + 1.05 * i),), log_bytes=1000 + 60 * i, members=(101,))
        for i in range(n)
    ]
    log = LogFacts(path="/run/train.log", total_bytes=1000 + 60 * n, last_growth_at=now - 0.5, observed=True,
                   size=1000 + 60 * n, mtime=now - 0.5)
    return JobObservation(samples=samples, stall_after_s=300.0, started_at=now - n - 30.0, log=log)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=900)
    ap.add_argument("--repeats", type=int, default=2000)
    args = ap.parse_args()
    now = 1_000_000.0
    obs = observation(args.samples, now)
    verdict = infer_phase(obs, now)
    t0 = time.process_time()
    for _ in range(args.repeats):
        verdict = infer_phase(obs, now, verdict)
    per_us = 1e6 * (time.process_time() - t0) / args.repeats
    print(json.dumps({"samples_in_window": args.samples, "us_per_judgment": round(per_us, 1),
                      "phase": verdict.phase}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

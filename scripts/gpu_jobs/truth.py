"""Ground truth for the phase engine: a job writes what it is really doing, as it does it.

Each call appends {"t", "pid", "job", "phase"} to the file named by $GPUWATCH_TRUTH (nothing when unset),
so a run's `gpuwatch watch --json` can be scored against what the job did (scripts/score_timeline.py).
"""
import json
import os
import sys
import time


def mark(phase: str) -> None:
    path = os.environ.get("GPUWATCH_TRUTH")
    if not path:
        return
    job = os.path.basename(sys.argv[0])
    with open(path, "a") as f:
        f.write(json.dumps({"t": time.time(), "pid": os.getpid(), "job": job, "phase": phase}) + "\n")

"""A sweep driver (no torch; with SWEEP_IMPORT_TORCH=1 it imports torch first, as one that imports the
project's code does): starts one training run per learning rate with subprocess.Popen, each with its own
log, writes their pids to argv[1] (space-separated) and waits for them; then stays, as a driver that reports."""
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

if os.environ.get("SWEEP_IMPORT_TORCH"):
    importlib.import_module("torch")

HERE = Path(__file__).resolve().parent
runs = []
for lr in sys.argv[2:]:
    log = open(f"run_lr{lr}.log", "wb")
    runs.append(subprocess.Popen([sys.executable, str(HERE / "train_standin.py"), "--lr", lr],
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
tmp = Path(sys.argv[1] + ".tmp")
tmp.write_text(" ".join(str(p.pid) for p in runs))
tmp.rename(sys.argv[1])  # (whole, never read half written)
for p in runs:
    p.wait()
print("sweep done", flush=True)
time.sleep(600)

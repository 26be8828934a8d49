"""A harness that runs training jobs one after another (subprocess.run), each for a few steps with its own
log; each run's pid is appended to argv[1] as it starts. It stays afterwards (the test ends it)."""
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
pids = Path(sys.argv[1])
steps = sys.argv[2]
for lr in sys.argv[3:]:
    with open(f"run_lr{lr}.log", "wb") as log:
        p = subprocess.Popen([sys.executable, str(HERE / "train_standin.py"), "--lr", lr, "--steps", steps],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        with pids.open("a") as f:
            f.write(f"{p.pid}\n")
        p.wait()
time.sleep(600)

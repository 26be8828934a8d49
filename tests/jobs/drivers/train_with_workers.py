"""One training process with its own multiprocessing workers (as DataLoader workers are): it loads torch,
forks two workers that wait for batches, prints steps; the workers' pids go to argv[1]."""
import multiprocessing as mp
import sys
import time
from pathlib import Path

import torch


def worker(q):
    while True:
        q.get()


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(q,), daemon=True) for _ in range(2)]
    for w in workers:
        w.start()
    Path(sys.argv[1]).write_text(" ".join(str(w.pid) for w in workers))
    x = torch.zeros(4)
    step = 0
    while True:
        step += 1
        x += 1
        print(f"step {step}", flush=True)
        time.sleep(0.2)

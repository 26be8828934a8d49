"""A training process that starts its ranks with torch.multiprocessing.spawn (as DDP examples do): it loads
torch, the ranks train; the ranks' pids go to argv[1]."""
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp


def rank(i):
    w = torch.zeros(4)
    step = 0
    while True:
        step += 1
        w += 1
        print(f"rank {i} step {step}", flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    ctx = mp.spawn(rank, nprocs=2, join=False)
    tmp = Path(sys.argv[1] + ".tmp")
    tmp.write_text(" ".join(str(p.pid) for p in ctx.processes))
    tmp.rename(sys.argv[1])
    ctx.join()

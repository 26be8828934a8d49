"""Holds GPU memory, trains a few logged steps, then blocks forever on a lock (a Python-level hang)."""
import threading
import time

from truth import mark

mark("starting")

import torch

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
mark("training")
for step in range(1, 6):
    for _ in range(50):
        c = a @ a
    torch.cuda.synchronize()
    print(f"step {step}/100 loss {1.0 / step:.4f}", flush=True)
    time.sleep(0.5)
mark("hung")
lock = threading.Lock()
lock.acquire()
lock.acquire()  # never returns

"""Two ranks all-reduce over NCCL; after --stop-after seconds rank 1 stops itself (SIGSTOP), so rank 0
spins inside the collective: the GPU reports ~100% util at idle power and nothing is logged.
Run with: torchrun --nproc_per_node 2 nccl_hang.py"""
import argparse
import os
import signal
import time

from truth import mark

mark("starting")

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--stop-after", type=float, default=20)
args = ap.parse_args()
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
x = torch.randn(64 << 20, device="cuda")
t0 = time.time()
step = 0
mark("training")
while True:
    dist.all_reduce(x)
    torch.cuda.synchronize()
    step += 1
    if step % 20 == 0:
        print(f"[rank{rank}] step {step} allreduce ok", flush=True)
    if rank == 1 and time.time() - t0 > args.stop_after:
        print(f"[rank{rank}] stopping myself", flush=True)
        mark("hung")
        os.kill(os.getpid(), signal.SIGSTOP)

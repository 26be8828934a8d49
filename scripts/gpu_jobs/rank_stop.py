"""N ranks train on the GPUs of one host and all-reduce every step; the run script SIGSTOPs one rank.

With a GPU per rank the collective is NCCL (the waiting ranks spin on their GPUs). With fewer GPUs than
ranks (NCCL refuses two ranks on one GPU) the ranks share the GPUs and all-reduce their CUDA tensors
over gloo: the waiting ranks then block on the CPU side instead of spinning.
Run with: torchrun --nproc_per_node 8 rank_stop.py"""
import os
import time

from truth import mark

mark("starting")

import torch
import torch.distributed as dist

local = int(os.environ["LOCAL_RANK"])
ngpu = torch.cuda.device_count()
world = int(os.environ["WORLD_SIZE"])
backend = "nccl" if ngpu >= world else "gloo"
torch.cuda.set_device(local % ngpu)
dist.init_process_group(backend)
rank = dist.get_rank()
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
grad = torch.randn(1 << 20, device="cuda")
print(f"[rank{rank}] {backend} on cuda:{local % ngpu} of {ngpu}, pid {os.getpid()}", flush=True)
mark("training")
step = 0
while True:
    for _ in range(8):
        a = (a @ a).clamp_(-1, 1)
    dist.all_reduce(grad)  # blocks while a peer is stopped
    grad /= world
    torch.cuda.synchronize()
    step += 1
    if step % 10 == 0:
        print(f"[rank{rank}] step {step} loss {float(grad.abs().mean()):.4f}", flush=True)
    time.sleep(0.05)

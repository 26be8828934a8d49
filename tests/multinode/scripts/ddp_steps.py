"""A data-parallel training loop over gloo (CPU): every step all-reduces the gradients of a tiny model, so
a rank that stops holds the others in the next all-reduce, as an NCCL job does on GPUs."""

import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 16), torch.randn(64, 1)
print(f"[rank{rank}] world {dist.get_world_size()} on pid {os.getpid()}", flush=True)
step = 0
while True:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)  # blocks while a peer is stopped
    opt.step()
    step += 1
    print(f"[rank{rank}] step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(0.2)

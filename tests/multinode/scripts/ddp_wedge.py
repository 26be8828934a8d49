"""A data-parallel loop over gloo (CPU), as ddp_steps.py, whose rank WEDGE_RANK wedges outside torch once the
file WEDGE_FILE exists (an idle loop in its data loading, as a stuck reader looks): every other rank then waits
in the next all-reduce. With TORCH_FR_BUFFER_SIZE set, torch's flight recorder records every collective; gloo
has no debug-info pipe, so the job serves TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe itself and writes torch's
own dump to TORCH_FR_DUMP_TEMP_FILE<rank>, as ProcessGroupNCCL does."""

import os
import threading
import time

import torch
import torch.distributed as dist


def serve_pipe(rank):
    pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + str(rank) + ".pipe"
    dump = os.environ.get("TORCH_FR_DUMP_TEMP_FILE", "/tmp/nccl_trace_rank_") + str(rank)
    if os.path.exists(pipe):
        os.unlink(pipe)
    os.mkfifo(pipe)
    while True:
        with open(pipe, "rb") as f:
            if not f.read(1):
                continue
        data = torch._C._distributed_c10d._dump_fr_trace()
        with open(dump + ".tmp", "wb") as out:
            out.write(data)
        os.replace(dump + ".tmp", dump)


def next_batch(x):
    while os.path.exists(os.environ.get("WEDGE_FILE", "/nonexistent")) and rank == int(os.environ["WEDGE_RANK"]):
        time.sleep(0.5)  # the wedged reader: idle, outside torch
    return x


dist.init_process_group("gloo")
rank = dist.get_rank()
if os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"):
    threading.Thread(target=serve_pipe, args=(rank,), daemon=True).start()
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 16), torch.randn(64, 1)
print(f"[rank{rank}] world {dist.get_world_size()} on pid {os.getpid()}", flush=True)
step = 0
while True:
    loss = torch.nn.functional.mse_loss(model(next_batch(x)), y)
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    step += 1
    print(f"[rank{rank}] step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(0.2)

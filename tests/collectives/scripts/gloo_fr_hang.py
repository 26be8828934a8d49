"""A 2-rank gloo job (CPU) with torch's flight recorder on (TORCH_FR_BUFFER_SIZE): three all-reduces, then
rank 0 enters a fourth that rank 1 never joins (rank 1 sleeps: wedged outside torch).

ProcessGroupNCCL dumps the recorder when a byte is written to TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe;
gloo has the recorder but not the pipe, so this job serves the same pipe itself, writing torch's own
dump (`_dump_fr_trace`) to TORCH_FR_DUMP_TEMP_FILE<rank> as NCCL's does."""

import os
import threading
import time

import torch
import torch.distributed as dist


def serve_pipe(rank):
    pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + str(rank) + ".pipe"
    dump = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank)
    os.mkfifo(pipe)
    while True:
        with open(pipe, "rb") as f:
            if not f.read(1):
                continue
        data = torch._C._distributed_c10d._dump_fr_trace()
        with open(dump + ".tmp", "wb") as out:
            out.write(data)
        os.replace(dump + ".tmp", dump)


dist.init_process_group("gloo")
rank = dist.get_rank()
threading.Thread(target=serve_pipe, args=(rank,), daemon=True).start()
x = torch.ones(4)
for _ in range(3):
    dist.all_reduce(x)
# Rank 0 enters the fourth before it says it is ready (the recorder has it once the work is launched).
fourth = dist.all_reduce(x, async_op=True) if rank == 0 else None
with open(os.environ["READY_DIR"] + "/ready%d" % rank, "w") as f:
    f.write(str(os.getpid()))
if fourth is not None:
    fourth.wait()  # waits for rank 1 forever
while True:
    time.sleep(0.5)  # rank 1: never reaches the fourth all_reduce

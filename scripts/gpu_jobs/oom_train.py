"""Trains on the GPU, doubles its batch every --grow-every seconds, and dies of a real CUDA out-of-memory
error (a traceback in the log). Between sizes it pauses briefly, as a real batch-size change does."""
import argparse
import time

from truth import mark

mark("starting")
import torch  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--grow-every", type=float, default=10)
args = ap.parse_args()
batch = 8 << 30  # bytes held per size, doubled until the GPU runs out (8+16+32+64 GiB, then 128 fails)
w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
mark("training")
step = 0
held = []
t_grow = time.time()
while True:
    for _ in range(20):
        c = w @ w
    torch.cuda.synchronize()
    step += 1
    if step % 50 == 0:
        print(f"step {step} loss {1.0 / step:.4f} batch_bytes={batch}", flush=True)
    if time.time() - t_grow > args.grow_every:
        t_grow = time.time()
        batch *= 2
        print(f"growing batch to {batch} bytes", flush=True)
        time.sleep(0.5)  # the dip a batch-size change causes
        try:
            held.append(torch.empty(batch, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            mark("crashed")
            raise

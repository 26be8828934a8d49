"""Trains on the GPU and prints progress with plain print(): run without -u under nohup, its log stays empty."""
import argparse
import time

from truth import mark

mark("starting")

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=80)
ap.add_argument("--print-every", type=int, default=500)  # a line every ~15 s: the 4-8 KiB buffer holds minutes
args = ap.parse_args()
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
mark("training")
start, step = time.time(), 0
while time.time() - start < args.seconds:
    for _ in range(20):
        c = a @ a
    torch.cuda.synchronize()
    step += 1
    if step % args.print_every == 0:
        print(f"step {step} loss {1.0 / step:.4f}")  # no flush: block-buffered into the file
mark("finished")

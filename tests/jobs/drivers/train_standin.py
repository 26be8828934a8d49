"""A CPU-only stand-in for one training run: it loads torch as a real run does, then prints a step every
0.2 s (flushed), for --steps steps (0: until stopped), and says when it is done."""
import argparse
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=0)
parser.add_argument("--lr", default="0.1")
args = parser.parse_args()
w = torch.zeros(4)
step = 0
while args.steps <= 0 or step < args.steps:
    step += 1
    w += float(args.lr)
    print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    time.sleep(0.2)
print("training done", flush=True)

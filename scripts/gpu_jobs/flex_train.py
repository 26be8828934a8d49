"""A small transformer with flex_attention, torch.compile'd, trained on a GPU for --seconds.

Prints what a HF Trainer prints (log dicts, v4 floats) every --log-every steps. Used to watch a
real first compile and steady training through gpuwatch's phase engine.
"""
import argparse
import math
import time

from truth import mark

mark("starting")

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=120)
ap.add_argument("--log-every", type=int, default=20)
args = ap.parse_args()

mark("loading")
print("loading config and building model", flush=True)
torch.manual_seed(0)
D, H, L, T, V, B = 512, 8, 4, 1024, 8192, 16
flex = torch.compile(flex_attention)


def causal(b, h, q, kv):
    return q >= kv


mask = create_block_mask(causal, None, None, T, T, device="cuda")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)

    def forward(self, x):
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = flex(q, k, v, block_mask=mask).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(a)
        return x + self.mlp(self.n2(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


model = torch.compile(Model().cuda().to(torch.bfloat16))
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
data = torch.randint(0, V, (B, T + 1), device="cuda")
mark("compiling")
print("starting training (first step compiles)", flush=True)
start = time.time()
step = 0
total = 10_000_000
while time.time() - start < args.seconds:
    t0 = time.time()
    logits = model(data[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, V), data[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    step += 1
    if step == 1:
        torch.cuda.synchronize()
        print(f"first step done in {time.time() - t0:.1f}s", flush=True)
        mark("training")
    if step % args.log_every == 0:
        print({"loss": round(loss.item(), 4), "grad_norm": 1.0, "learning_rate": 3e-4,
               "epoch": round(step / 1000, 2)}, flush=True)
print({"train_runtime": round(time.time() - start, 1), "train_loss": round(loss.item(), 4), "epoch": 1.0}, flush=True)
mark("finished")

#!/usr/bin/env python3
"""Four real jobs sharing GPU 0, each judged by its own share of it, measured on one H100/H200.

Runs `gpuwatch watch --json` (local transport, 1 s samples, stall_after 30 s) for ~4.5 minutes while four jobs
run on GPU 0, each started as people start them (`nohup python train.py > train.log 2>&1 &`) and each writing
its own truth timeline (scripts/gpu_jobs/truth.py) to OUTDIR/truth.jsonl:
  - compile:  a first torch.compile that recompiles for one new shape after another for COMPILE_S (cold
              inductor cache), while the GPU is busy with its neighbours; then trains, logging steps
  - hang:     trains a few logged steps, then blocks on a lock (CPU flat, context held, its GPU share 0)
  - buffered: a bf16 matmul loop printing with plain print() under `env -u PYTHONUNBUFFERED`: its log stays empty
  - train:    a bf16 matmul loop printing a step a second
Then scores every job's verdicts against its own truth (scripts/score_timeline.py; goal >= 95 % each), and
measures the probe's cost per NVML sample with per-process reads on and off while the four share the GPU,
and the cost of one nvmlDeviceGetProcessUtilization call. Writes OUTDIR/summary.json and summary.txt
(and watch.jsonl, truth.jsonl, score.json, probe_cost.json, jobs/NAME/train.log).

Without torch+CUDA (a reduced mode, for the plumbing): CPU stand-ins of the hang, the buffered and the training
jobs, no compile job, no GPU; it says the GPU parts were skipped. Every process started here is stopped by its pid.

Usage: python3 scripts/gpu_jobs/shared_gpu_h200.py OUTDIR   (scripts/gpu_jobs/shared_gpu_h200.sh wraps it)"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from job_runner import has_cuda, start_job, stop, write_config  # beside this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY = sys.executable
RUN_S = float(os.environ.get("SHARED_RUN_S", "250"))  # the watch's length
COMPILE_S = float(os.environ.get("SHARED_COMPILE_S", "45"))  # the compile job compiles at least this long
COMPILE_AT_S = 15.0  # it starts this long after the others: its neighbours are busy by then
COST_AT_S = min(150.0, 0.6 * RUN_S)  # the probe's cost is measured from then on, the four jobs still on the GPU
COST_SAMPLES = int(os.environ.get("SHARED_COST_SAMPLES", "60"))

# Each job: the truth marks (truth.py), on the GPU with torch where CUDA is, else a CPU stand-in.
PRELUDE = r'''
import os, sys, threading, time
sys.path.insert(0, os.environ["SHARED_TRUTH_LIB"])
from truth import mark
mark("starting")
GPU = os.environ.get("SHARED_GPU") == "1"
if GPU:
    import torch
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
def work(seconds):
    end = time.monotonic() + seconds
    if GPU:
        while time.monotonic() < end:
            for _ in range(10):
                b = a @ a
            torch.cuda.synchronize()
    else:
        x = 0
        while time.monotonic() < end:
            x += sum(i * i for i in range(2000))
'''

JOBS = {
    "train": PRELUDE + r'''
mark("training")
step = 0
while True:
    work(1.0)
    step += 1
    print(f"step {step}/100000 loss {1.0 / step:.4f}", flush=True)
''',
    "hang": PRELUDE + r'''
mark("training")
for step in range(1, 9):
    work(1.0)
    print(f"step {step}/100 loss {1.0 / step:.4f}", flush=True)
mark("hung")
lock = threading.Lock()
lock.acquire()
lock.acquire()  # never returns: CPU flat, the CUDA context held
''',
    "buffered": PRELUDE + r'''
mark("training")
step = 0
while True:
    work(1.0)
    step += 1
    if step % 100 == 0:
        print(f"step {step} loss {1.0 / step:.4f}")  # no flush, no -u: block-buffered into the file
''',
    "compile": PRELUDE + r'''
import torch.nn as nn
import torch.nn.functional as F
torch._dynamo.config.automatic_dynamic_shapes = False  # every new shape is a new compile
for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
    if hasattr(torch._dynamo.config, name):
        setattr(torch._dynamo.config, name, 4096)
D, H, L, V = 512, 8, 4, 8192

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.o = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(y)
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
def step(T):
    data = torch.randint(0, V, (4, T + 1), device="cuda")
    loss = F.cross_entropy(model(data[:, :-1]).float().reshape(-1, V), data[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
mark("compiling")
print("compiling (one new shape after another)", flush=True)
start, T, shapes = time.monotonic(), 64, 0
while time.monotonic() - start < float(os.environ["SHARED_COMPILE_S"]):
    T += 8
    step(T)
    torch.cuda.synchronize()
    shapes += 1
print(f"compiled {shapes} shapes in {time.monotonic() - start:.1f}s", flush=True)
mark("training")
n = 0
while True:
    t = time.monotonic()
    while time.monotonic() - t < 1.0:
        loss = step(T)
    n += 1
    print(f"step {n}/100000 loss {loss.item():.4f}", flush=True)
''',
}

COST = r'''
import json, sys, time
import pynvml
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
probe = LoadedProbe()
gpu_nvml = probe.module("gpu_nvml")
on = gpu_nvml.NvmlSource(pynvml)
off = gpu_nvml.NvmlSource(pynvml)
off.proc_util = None
reader = on.proc_util
if reader is None:
    print(json.dumps({"error": "nvmlDeviceGetProcessUtilization not available"}))
    sys.exit(0)
# one call's cost, GPU 0 (shared), 20 calls 0.5 s apart (a fresh reader: its pacing is not in the way)
calls = []
direct = probe.module("gpu_proc_util").ProcUtilReader(pynvml, on.handles)
for k in range(20):
    t = time.perf_counter(); got = direct.read(0); calls.append(time.perf_counter() - t)
    time.sleep(0.5)
on_ms, off_ms, seen = [], [], []
for k in range(int(sys.argv[1])):
    # in turn first: the first sample after the sleep pays the wake-up (an H100 run put ~0.25 ms on it)
    if k % 2:
        t = time.perf_counter(); off.sample(); off_ms.append(time.perf_counter() - t)
    t = time.perf_counter(); frame = on.sample(); on_ms.append(time.perf_counter() - t)
    if not k % 2:
        t = time.perf_counter(); off.sample(); off_ms.append(time.perf_counter() - t)
    seen.append({str(g["index"]): {str(p["pid"]): p["sm_pct"] for p in g.get("processes", [])} for g in frame
                 if g.get("processes")})
    time.sleep(max(0.0, 1.0 - (on_ms[-1] + off_ms[-1])))
print(json.dumps({"samples": len(on_ms), "call_ms": [round(x * 1000, 4) for x in calls],
                  "last_read_gpu0": got, "reads": reader.reads, "read_s": reader.cost_s,
                  "mean_cost_s": reader.cost, "budget_s_per_s": probe.module("gpu_proc_util").BUDGET_S_PER_S,
                  "with_ms": [round(x * 1000, 4) for x in on_ms], "without_ms": [round(x * 1000, 4) for x in off_ms],
                  "per_process": seen}))
'''


class Watch:
    """`gpuwatch watch --json`, its lines written as they come (the format score_timeline.py reads)."""

    def __init__(self, config: Path, out: Path, env: dict):
        self.out = open(out / "watch.jsonl", "wb")
        self.err = open(out / "watch.stderr", "wb")
        self.proc = subprocess.Popen([PY, "-m", "gpuwatch_tui.cli", "watch", "--json", "--config", str(config)],
                                     stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL, env=env,
                                     cwd=str(ROOT), start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.out.close()
        self.err.close()


def score(out: Path) -> dict:
    """scripts/score_timeline.py's figures per job (its printout in score.txt)."""
    res = subprocess.run([PY, str(ROOT / "scripts" / "score_timeline.py"), str(out / "watch.jsonl"),
                          str(out / "truth.jsonl"), "--stall-after", "30", "--json", str(out / "score.json")],
                         capture_output=True, text=True, timeout=120)
    (out / "score.txt").write_text(res.stdout + res.stderr)
    try:
        return json.loads((out / "score.json").read_text())
    except (OSError, ValueError):
        return {"error": (res.stderr or res.stdout)[-2000:]}


def shares_seen(out: Path, pids: dict[str, int]) -> dict:
    """Per job: the median SM share the watch's GPU entries gave its pid, and in how many snapshots."""
    by_pid: dict[int, list[float]] = {pid: [] for pid in pids.values()}
    for raw in (out / "watch.jsonl").read_text().splitlines():
        try:
            snap = json.loads(raw)
        except ValueError:
            continue
        for host in snap.get("hosts", []):
            for g in host.get("gpus", []):
                for p in g.get("processes", []):
                    if p.get("pid") in by_pid and p.get("sm_pct") is not None:
                        by_pid[p["pid"]].append(p["sm_pct"])
    return {name: {"median_sm_pct": round(statistics.median(by_pid[pid]), 1) if by_pid[pid] else None,
                   "snapshots": len(by_pid[pid])} for name, pid in pids.items()}


def summarise_cost(cost: dict | None) -> dict | None:
    if not cost or "with_ms" not in cost:
        return cost
    on, off, calls = cost["with_ms"], cost["without_ms"], cost["call_ms"]
    return {"samples": cost["samples"], "reads": cost["reads"], "budget_ms_per_s": cost["budget_s_per_s"] * 1000,
            "call_ms_median": round(statistics.median(calls), 3), "call_ms_max": round(max(calls), 3),
            "per_read_ms": round(cost["read_s"] * 1000 / cost["reads"], 3) if cost["reads"] else None,
            "with_per_process_mean_ms": round(statistics.mean(on), 4),
            "without_mean_ms": round(statistics.mean(off), 4),
            "added_mean_ms": round(statistics.mean(on) - statistics.mean(off), 4),
            "last_read_gpu0": cost.get("last_read_gpu0")}


def text(summary: dict) -> str:
    out = [f"torch/CUDA: {summary['cuda']}", f"every job >= 95% of its samples right: {summary.get('goal_met')}", ""]
    for name, j in summary.get("score", {}).get("jobs", {}).items():
        out.append(f"{name:9s} {j['right']}/{j['scored']} samples right ({j['percent']}%; goal >= 95%), "
                   f"false stalled in start-up: {j['false_stalled_startup']}")
        out.append(f"{'':9s} truth:    " + "  ".join(f"+{s:.0f}s {p}" for s, p in j["truth"]))
        out.append(f"{'':9s} gpuwatch: " + "  ".join(f"+{s:.0f}s {p}{'/' + d if d else ''}"
                                                     for s, p, d in j["timeline"]))
        for w in j["disagreements"][:6]:
            out.append(f"{'':9s} disagree at +{w[0]}s: truth {w[1]}, gpuwatch {w[2]}")
    if "error" in summary.get("score", {}):
        out.append(f"scoring failed: {summary['score']['error']}")
    out.append("")
    out.append(f"per-process SM share seen in the watch: {summary.get('shares')}")
    out.append(f"probe cost (per NVML sample, per-process reads on vs off): {summary.get('probe_cost')}")
    return "\n".join(out) + "\n"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    (out / "jobs").mkdir(parents=True, exist_ok=True)
    truth = out / "truth.jsonl"
    truth.write_text("")
    cuda, note = has_cuda()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT / "src") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(GPUWATCH_TRUTH=str(truth), SHARED_TRUTH_LIB=str(HERE), SHARED_GPU="1" if cuda else "0",
               SHARED_COMPILE_S=str(COMPILE_S), TORCHINDUCTOR_CACHE_DIR=str(out / "inductor-cache"),
               TRITON_CACHE_DIR=str(out / "triton-cache"))
    if cuda:
        env["CUDA_VISIBLE_DEVICES"] = env.get("SHARED_GPU_INDEX", "0")
    names = ["train", "hang", "buffered"] + (["compile"] if cuda else [])
    config = write_config(out, names, ["[settings]", "sample_interval = 1.0", 'stall_after = "30s"', ""])
    procs: dict[str, subprocess.Popen] = {}
    cost = None
    watch = Watch(config, out, env)
    t0 = time.time()
    try:
        time.sleep(3)
        for name in ("train", "hang", "buffered"):
            procs[name] = start_job(name, JOBS[name], out, env)
        if cuda:
            time.sleep(max(0.0, t0 + COMPILE_AT_S - time.time()))
            procs["compile"] = start_job("compile", JOBS["compile"], out, env)
        if cuda:
            time.sleep(max(0.0, t0 + COST_AT_S - time.time()))
            c = subprocess.run([PY, "-c", COST, str(COST_SAMPLES)], capture_output=True, text=True, env=env,
                               timeout=COST_SAMPLES * 3 + 60)
            (out / "probe_cost.stderr").write_text(c.stderr)
            if c.returncode == 0 and c.stdout.strip():
                cost = json.loads(c.stdout)
                (out / "probe_cost.json").write_text(json.dumps(cost))
        time.sleep(max(0.0, t0 + RUN_S - time.time()))
    finally:
        watch.stop()  # first: a job stopped here would read as crashed
        for p in procs.values():
            stop(p)
    summary = {"cuda": note if cuda else f"GPU parts skipped ({note}): CPU stand-ins, no compile job, no GPU",
               "run_s": round(time.time() - t0, 1), "pids": {n: p.pid for n, p in procs.items()},
               "score": score(out), "shares": shares_seen(out, {n: p.pid for n, p in procs.items()}),
               "probe_cost": summarise_cost(cost)}
    jobs = summary["score"].get("jobs", {})
    summary["goal_met"] = bool(jobs) and all(j["percent"] >= 95.0 for j in jobs.values())
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.txt").write_text(text(summary))
    print(text(summary))
    return 0 if (out / "watch.jsonl").stat().st_size else 1


if __name__ == "__main__":
    sys.exit(main())

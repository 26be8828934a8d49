#!/usr/bin/env python3
"""A hang named in a minute, measured on one GPU (H100/H200) at gpuwatch's DEFAULT settings.

Runs `gpuwatch watch --json` (local transport: the config's only host is this machine) over ~7 minutes while
real jobs run, then writes OUTDIR/summary.json and OUTDIR/summary.txt:
  - fast_hang: prints a step every 2 s for 40 s, then blocks on a lock (CPU flat)   -> time to `stalled`
  - slow_step: a step every 40 s, CPU busy in between                               -> never `stalled`
  - silent:    holds its process, prints nothing, CPU flat                          -> `stalled` at stall_after
  - on the GPU, one after another (GPM figures are per GPU, so each has it alone):
    spin (steps for 30 s, then `torch.cuda._sleep` spins silently: a rank in a collective) -> `stalled (nccl-spin)`
    matmul (a bf16 matmul loop, a step every 2 s)                                  -> never `stalled`
    dataloader (GPU idle, CPU busy, a step every 5 s)                              -> never `stalled`
  - the probe's NVML source, GPM on and off, sampled at 1 Hz during the silent spin: its cost per sample.
Each job writes its own event times (last step, spin start) to OUTDIR/events/NAME.json. Every process
started here is stopped by its pid at the end. The GPU parts are skipped (and said so) without torch+CUDA.

Usage: python3 scripts/gpu_jobs/hang_h200.py OUTDIR   (scripts/gpu_jobs/hang_h200.sh wraps it)"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from job_runner import has_cuda, start_job, stop, write_config  # beside this script

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SPIN_S, MATMUL_S, LOADER_S = 150.0, 75.0, 75.0
TOTAL_S = float(os.environ.get("HANG_TOTAL_S", "400"))  # >= stall_after (300 s) + start-up, for `silent`
COST_SAMPLES = int(os.environ.get("HANG_COST_SAMPLES", "90"))

COMMON = r'''
import json, os, sys, threading, time
EVENTS = os.environ["HANG_EVENTS"]
def event(**kw):
    path = os.path.join(EVENTS, os.environ["HANG_NAME"] + ".json")
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        d = {}
    d.update(kw)
    with open(path + ".tmp", "w") as f:
        json.dump(d, f)
    os.replace(path + ".tmp", path)
def busy(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += sum(i * i for i in range(2000))
    return x
'''

JOBS = {
    "fast_hang": COMMON + r'''
for step in range(1, 21):
    busy(0.3); time.sleep(1.7)
    print(f"step {step}/2000 loss {1.0 / step:.4f}", flush=True)
    event(last_step_at=time.time())
lock = threading.Lock(); lock.acquire(); lock.acquire()
''',
    "slow_step": COMMON + r'''
step = 0
while True:
    busy(40.0)
    step += 1
    print(f"step {step}/100 loss {1.0 / step:.4f}", flush=True)
    event(last_step_at=time.time())
''',
    "silent": COMMON + r'''
event(started_at=time.time())
threading.Event().wait()
''',
    "spin": COMMON + r'''
import torch
x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
for step in range(1, 16):
    t = time.monotonic()
    while time.monotonic() - t < 2.0:
        y = x @ x
    torch.cuda.synchronize()
    print(f"step {step}/2000 loss {1.0 / step:.4f}", flush=True)
    event(last_step_at=time.time())
event(spin_from=time.time())
while True:  # a kernel that waits: ~100% util, no SM work, no DRAM traffic
    torch.cuda._sleep(200_000_000)
    torch.cuda.synchronize()
''',
    "matmul": COMMON + r'''
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
step = 0
while True:
    t = time.monotonic()
    while time.monotonic() - t < 2.0:
        b = a @ a
    torch.cuda.synchronize()
    step += 1
    print(f"step {step}/100000 loss {1.0 / step:.4f}", flush=True)
    event(last_step_at=time.time())
''',
    "dataloader": COMMON + r'''
import torch
x = torch.zeros(1024, device="cuda")
step = 0
while True:
    busy(5.0)  # decoding and augmenting on the CPU: the GPU waits for data
    x += 1
    torch.cuda.synchronize()
    step += 1
    print(f"step {step}/100000 loss {1.0 / step:.4f}", flush=True)
    event(last_step_at=time.time())
''',
}
GPU_JOBS = ("spin", "matmul", "dataloader")

COST = r'''
import json, sys, time
import pynvml
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
probe = LoadedProbe()
gpu_nvml = probe.module("gpu_nvml")
with_gpm = gpu_nvml.NvmlSource(pynvml)
without = gpu_nvml.NvmlSource(pynvml)
if without.gpm is not None:
    without.gpm.close()
    without.gpm = None
on, off = [], []
for k in range(int(sys.argv[1])):
    # in turn first: the first sample after the sleep pays the wake-up (an H100 run put ~0.15 ms on it)
    for source, times in ((with_gpm, on), (without, off))[::1 if k % 2 == 0 else -1]:
        t = time.perf_counter(); source.sample(); times.append(time.perf_counter() - t)
    time.sleep(max(0.0, 1.0 - (on[-1] + off[-1])))
gpm = with_gpm.gpm
print(json.dumps({"samples": len(on), "gpm_supported": None if gpm is None else gpm.supported,
                  "gpm_reads": 0 if gpm is None else gpm.reads, "gpm_read_s": 0.0 if gpm is None else gpm.cost_s,
                  "with_gpm_ms": [round(x * 1000, 4) for x in on], "without_gpm_ms": [round(x * 1000, 4) for x in off],
                  "read_every_s": probe.module("gpu_gpm").READ_EVERY_S}))
'''


class Watch:
    """`gpuwatch watch --json`, each line stamped with the time it was read."""

    def __init__(self, config: Path, out: Path, env: dict):
        self.path = out / "watch.jsonl"
        self.err = open(out / "watch.stderr", "wb")
        self.proc = subprocess.Popen([PY, "-m", "gpuwatch_tui.cli", "watch", "--json", "--config", str(config)],
                                     stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL, env=env,
                                     cwd=str(ROOT), start_new_session=True)
        self.lines = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        with open(self.path, "w") as f:
            for raw in self.proc.stdout:
                try:
                    snap = json.loads(raw)
                except ValueError:
                    continue
                f.write(json.dumps({"read_at": time.time(), "snap": snap}) + "\n")
                f.flush()
                self.lines += 1

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.thread.join(5)
        self.err.close()


def summarise(out: Path, names, windows: dict, cost: dict | None, cuda_note: str) -> dict:
    events = {}
    for name in names:
        try:
            events[name] = json.loads((out / "events" / f"{name}.json").read_text())
        except (OSError, ValueError):
            events[name] = {}
    timelines = {n: [] for n in names}
    gpm = {n: [] for n in GPU_JOBS}
    first_stalled = {}
    for raw in (out / "watch.jsonl").read_text().splitlines():
        row = json.loads(raw)
        at, snap = row["read_at"], row["snap"]
        for job in snap.get("jobs", []):
            name = job.get("name")
            if name not in timelines:
                continue
            key = (job.get("phase"), job.get("detail"))
            tl = timelines[name]
            if not tl or (tl[-1]["phase"], tl[-1]["detail"]) != key:
                tl.append({"at": round(at, 1), "phase": key[0], "detail": key[1],
                           "evidence": job.get("evidence", [])[:8]})
            if key[0] == "stalled" and name not in first_stalled:
                first_stalled[name] = at
        for host in snap.get("hosts", []):
            for g in host.get("gpus", []):
                for name, (t0, t1) in windows.items():
                    if t0 <= at <= t1:
                        gpm[name].append({k: g.get(k) for k in ("util_pct", "power_w", "sm_active_pct",
                                                                "tensor_active_pct", "dram_active_pct")})
    t_start = min((tl[0]["at"] for tl in timelines.values() if tl), default=0.0)
    for tl in timelines.values():
        for entry in tl:
            entry["t"] = round(entry["at"] - t_start, 1)

    def med(rows, key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return round(statistics.median(vals), 2) if vals else None

    result = {"cuda": cuda_note, "jobs": {}}
    for name in names:
        ev = events[name]
        ref = ev.get("spin_from") if name == "spin" else ev.get("last_step_at", ev.get("started_at"))
        stalled_at = first_stalled.get(name)
        entry = {"events": ev, "timeline": timelines[name],
                 "stalled_after_s": None if stalled_at is None or ref is None else round(stalled_at - ref, 1),
                 "ever_stalled": stalled_at is not None,
                 "stalled_detail": next((e["detail"] for e in timelines[name] if e["phase"] == "stalled"), None)}
        if name in gpm:
            rows = gpm[name][len(gpm[name]) // 3:]  # past the start-up
            entry["gpm_median"] = {k: med(rows, k) for k in ("util_pct", "power_w", "sm_active_pct",
                                                             "tensor_active_pct", "dram_active_pct")}
            entry["gpm_samples"] = len(rows)
        result["jobs"][name] = entry
    if cost is not None:
        on, off = cost["with_gpm_ms"], cost["without_gpm_ms"]
        result["probe_cost"] = {
            "samples": cost["samples"], "gpm_supported": cost["gpm_supported"], "gpm_reads": cost["gpm_reads"],
            "read_every_s": cost["read_every_s"],
            "with_gpm_mean_ms": round(statistics.mean(on), 4), "with_gpm_max_ms": round(max(on), 4),
            "without_gpm_mean_ms": round(statistics.mean(off), 4),
            "gpm_added_mean_ms": round(statistics.mean(on) - statistics.mean(off), 4),
            "gpm_per_read_ms": round(cost["gpm_read_s"] * 1000 / cost["gpm_reads"], 3) if cost["gpm_reads"] else None,
        }
    return result


def text(summary: dict) -> str:
    out = [f"torch/CUDA: {summary['cuda']}", ""]
    want = {"fast_hang": "stalled within ~60 s of its last step", "slow_step": "never stalled",
            "silent": "stalled at stall_after (300 s)", "spin": "stalled (nccl-spin) within ~60 s of the spin",
            "matmul": "never stalled", "dataloader": "never stalled"}
    for name, j in summary["jobs"].items():
        phases = " -> ".join(f"{e['phase']}{'(' + e['detail'] + ')' if e['detail'] else ''}@{e['t']:.0f}s"
                             for e in j["timeline"])
        out.append(f"{name:11s} goal: {want.get(name, '')}")
        out.append(f"{'':11s} stalled after: {j['stalled_after_s']} s ({j['stalled_detail']}); timeline: {phases}")
        if "gpm_median" in j:
            out.append(f"{'':11s} GPM median: {j['gpm_median']} ({j['gpm_samples']} snapshots)")
    if "probe_cost" in summary:
        out += ["", f"probe cost per NVML sample: {summary['probe_cost']}"]
    return "\n".join(out) + "\n"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    (out / "events").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT / "src") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["HANG_EVENTS"] = str(out / "events")
    cuda, note = has_cuda()
    names = ["fast_hang", "slow_step", "silent"] + (list(GPU_JOBS) if cuda else [])
    config = write_config(out, names, ["# defaults everywhere: no [settings]"])
    procs: dict[str, subprocess.Popen] = {}
    windows: dict[str, tuple[float, float]] = {}
    cost = None
    watch = Watch(config, out, env)
    t0 = time.time()
    try:
        for name in ("fast_hang", "slow_step", "silent"):
            procs[name] = start_job(name, JOBS[name], out, dict(env, HANG_NAME=name))
        if cuda:
            plan = [("spin", SPIN_S), ("matmul", MATMUL_S), ("dataloader", LOADER_S)]
            for name, seconds in plan:
                start = time.time()
                procs[name] = start_job(name, JOBS[name], out, dict(env, HANG_NAME=name))
                if name == "spin":  # the probe's cost, GPM on and off, while the GPU spins (GPM read most)
                    time.sleep(45)
                    c = subprocess.run([PY, "-c", COST, str(COST_SAMPLES)], capture_output=True, text=True,
                                       env=env, timeout=COST_SAMPLES * 3 + 60)
                    (out / "probe_cost.stderr").write_text(c.stderr)
                    if c.returncode == 0:
                        cost = json.loads(c.stdout)
                time.sleep(max(0.0, start + seconds - time.time()))
                windows[name] = (start, time.time())
                stop(procs[name])
        time.sleep(max(0.0, t0 + TOTAL_S - time.time()))
    finally:
        for p in procs.values():
            stop(p)
        watch.stop()
    if cost is not None:
        (out / "probe_cost.json").write_text(json.dumps(cost))
    summary = summarise(out, names, windows, cost, note if cuda else f"GPU parts skipped ({note})")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.txt").write_text(text(summary))
    print(text(summary))
    return 0 if watch.lines else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Job boundaries on a real GPU host, through the real probe on the local transport (NVML), in about 2 minutes.

  1. sweep:  a plain Python driver (no torch, stdout a pipe) starts 2 CUDA training runs with subprocess.Popen,
             each logging to its own file                     -> expected: 2 jobs, the driver in neither
  2. spawn:  a training process (torch loaded, stdout a pipe: not a job candidate) starts 2 ranks with
             torch.multiprocessing.spawn; only the ranks open a CUDA context -> expected: 1 job rooted at the
             parent (its only evidence: torch in its maps, the probe's "ml" list)
  3. kill:   the kill plan of sweep run 0 (as the monitor makes it), carried out by the probe's kill op
             -> expected: that run signalled alone; the driver and run 1 alive
  4. cost:   the probe's ML-runtime check (one /proc/PID/maps read) on the CUDA parent and a rank: ms per read,
             maps size (lines)
Writes OUTDIR/sweep_boundaries.json and prints it. Every process started here is stopped by its pid. Without
CUDA the runs train on the CPU (the GPU parts then read "no GPU"); the script still runs end to end.

Usage: python3 scripts/gpu_jobs/sweep_boundaries.py OUTDIR"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "src" / "gpuwatch_tui" / "probe"))  # the op modules, imported as a host does

import ops_signal  # noqa: E402
from gpuwatch_tui.actions.job_tree import JobTree  # noqa: E402
from gpuwatch_tui.actions.kill import kill_job  # noqa: E402
from gpuwatch_tui.feeds.probe_frames import parse_sample  # noqa: E402
from gpuwatch_tui.jobs.settings import JobSettings  # noqa: E402
from gpuwatch_tui.jobs.tracker import JobTracker  # noqa: E402
from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv  # noqa: E402

PY = sys.executable
RUN = r'''
import sys, time, torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.randn(2048, 2048, device=dev)
step = 0
while True:
    step += 1
    for _ in range(20):
        y = x @ x
    if dev == "cuda":
        torch.cuda.synchronize()
    print("step %d" % step, flush=True)
    time.sleep(0.2)
'''
DRIVER = r'''
import subprocess, sys, time
runs = [subprocess.Popen([sys.executable, sys.argv[1]], stdout=open("run%d.log" % i, "wb"),
                         stderr=subprocess.STDOUT) for i in range(2)]
print(" ".join(str(p.pid) for p in runs), flush=True)
for p in runs:
    p.wait()
time.sleep(600)
'''
SPAWN = r'''
import sys, time, torch
import torch.multiprocessing as mp
def rank(i, path):
    exec(open(path).read(), {"__name__": "rank"})
if __name__ == "__main__":
    ctx = mp.spawn(rank, args=(sys.argv[1],), nprocs=2, join=False)
    print(" ".join(str(p.pid) for p in ctx.processes), flush=True)
    ctx.join()
'''


class Probe:
    """The real probe on this machine (local transport), feeding a real JobTracker frame by frame."""

    def __init__(self):
        self.tracker = JobTracker(JobSettings(stall_after_s=300))
        self.proc = subprocess.Popen(local_argv(PY), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.proc.stdin.write(build_payload({"interval": 1.0, "gpu_source": "auto"}))
        self.proc.stdin.flush()
        self.frame = {}

    def step(self):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the probe exited")
            frame = json.loads(line)
            if frame.get("type") == "sample":
                break
        self.frame = frame
        self.tracker.update("local", parse_sample(frame), time.time())
        self.proc.stdin.write(json.dumps({"op": "want", **asdict(self.tracker.wanted("local"))}).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, done, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.step()
            if done():
                return True
        return False

    def jobs(self, pids):
        """The jobs holding any of `pids`: name, top pid, pids, GPUs."""
        return [{"id": v.id, "name": v.name, "root": v.root.pid if v.root else None, "pids": list(v.pids),
                 "gpus": list(v.gpus)} for v in self.tracker.views() if set(v.pids) & set(pids)]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)


async def local_request(op, args, timeout):
    return await asyncio.wait_for(asyncio.to_thread(ops_signal.OPS[op], args), timeout)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def maps_cost(pid, reads=20):
    import ml_libs
    from procfs import maps_have

    try:
        lines = sum(1 for _ in open("/proc/%d/maps" % pid))
    except OSError:
        return None
    t0 = time.perf_counter()
    found = False
    for _ in range(reads):
        found = maps_have(pid, ml_libs.ML_LIBS)
    return {"pid": pid, "maps_lines": lines, "ml_found": found, "ms_per_read": 1000 * (time.perf_counter() - t0) / reads}


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    started = []
    result = {"gpu": None}
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        result["gpu"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        result["gpu"] = "no nvidia-smi: %s" % exc
    probe = Probe()
    try:
        # 1. the sweep (each run: train_cuda.py)
        (work / "train_cuda.py").write_text(RUN)
        (work / "sweep.py").write_text(DRIVER)
        driver = subprocess.Popen([PY, "sweep.py", "train_cuda.py"], cwd=work, stdout=subprocess.PIPE, env=env,
                                  start_new_session=True)
        started.append(driver.pid)
        runs = [int(p) for p in driver.stdout.readline().split()]
        started += runs
        t0 = time.monotonic()
        ok = probe.until(lambda: all(any(j["root"] == r for j in probe.jobs([r])) for r in runs), 120)
        result["sweep"] = {"driver": driver.pid, "runs": runs, "found": ok, "seconds": time.monotonic() - t0,
                           "jobs": probe.jobs([driver.pid, *runs]),
                           "driver_in_a_job": bool(probe.jobs([driver.pid])),
                           "driver_ml": driver.pid in probe.frame.get("ml", [])}
        # 2. torch.multiprocessing.spawn (its ranks import the script: a file, not -c)
        (work / "spawn_train.py").write_text(SPAWN)
        parent = subprocess.Popen([PY, "spawn_train.py", "train_cuda.py"], cwd=work, stdout=subprocess.PIPE, env=env,
                                  start_new_session=True)
        started.append(parent.pid)
        ranks = [int(p) for p in parent.stdout.readline().split()]
        started += ranks
        t0 = time.monotonic()
        # (without a GPU nothing makes these ranks jobs: their stdout is a pipe; a few frames say so)
        ok = probe.until(lambda: any(j["root"] == parent.pid and set(ranks) <= set(j["pids"])
                                     for j in probe.jobs(ranks)), 120 if probe.frame.get("gpus") else 5)
        result["gpus_seen"] = len(probe.frame.get("gpus") or [])
        result["spawn"] = {"parent": parent.pid, "ranks": ranks, "one_job_at_parent": ok,
                           "seconds": time.monotonic() - t0, "jobs": probe.jobs([parent.pid, *ranks]),
                           "parent_ml": parent.pid in probe.frame.get("ml", [])}
        # 3. kill sweep run 0
        view = next((v for v in probe.tracker.views() if v.root is not None and v.root.pid == runs[0]), None)
        if view is not None:
            tree = JobTree("local", view.name, tuple(probe.tracker.procs(view.id)))
            report = asyncio.run(kill_job(local_request, tree, grace_s=5.0, kill_wait_s=3.0))
            time.sleep(1.0)
            result["kill"] = {"targets": [t.pid for t in tree.targets()], "ok": report.ok,
                              "signalled": [o.pid for o in report.outcomes if o.signalled],
                              "driver_alive": alive(driver.pid), "run1_alive": alive(runs[1])}
        # 4. the cost of the ML-runtime check on CUDA processes
        result["maps_cost"] = [maps_cost(parent.pid), maps_cost(ranks[0]) if ranks else None]
    finally:
        probe.close()
        for pid in reversed(started):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    sweep, spawn, kill = result.get("sweep", {}), result.get("spawn", {}), result.get("kill", {})
    result["expectations"] = {
        "sweep: 2 jobs, driver in none": bool(sweep.get("found")) and not sweep.get("driver_in_a_job"),
        # (without a GPU the ranks are no jobs at all: not a finding)
        "spawn: 1 job at the parent": bool(spawn.get("one_job_at_parent")) if result.get("gpus_seen") else None,
        "kill: run 0 only": kill.get("signalled") == sweep.get("runs", [None])[:1] and bool(kill.get("driver_alive"))
        and bool(kill.get("run1_alive")),
    }
    text = json.dumps(result, indent=2)
    (out / "sweep_boundaries.json").write_text(text + "\n")
    print(text)
    return 0 if all(v for v in result["expectations"].values() if v is not None) else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))

#!/usr/bin/env python3
"""Leftovers on a real GPU: a job's main process is SIGKILLed while the worker it started keeps its CUDA
context and memory; gpuwatch (local transport, NVML) must show the worker as the job's leftover with the
memory NVML reports for it, and a reap must end exactly it and free the memory.

Steps, each timed (OUTDIR/summary.json, OUTDIR/summary.txt):
  1. the job: a main process holding ~4 GiB on cuda:0 that starts a worker (it names itself pt_data_worker,
     as DataLoader workers do) holding ~2 GiB; gpuwatch sees the job with both on the GPU
  2. SIGKILL to the main process: time until gpuwatch shows the leftover, with its GPU memory (compared with
     NVML's own per-process figure), and that the worker is not a job of its own
  3. `gpuwatch status --json` from a fresh process (it never saw the main process): the orphaned worker
     (found only where it holds GPU memory: without it, it is no job candidate)
  4. a reap (the action service, as R / `gpuwatch reap`): its plan, outcome and the time until NVML no
     longer lists the worker
Every process started here is stopped by its pid at the end. Without torch+CUDA (or with --cpu) the
workers hold no GPU memory: the same steps run and say so.

Usage: python3 scripts/gpu_jobs/leftovers_h200.py OUTDIR [--cpu]   (under 2 minutes)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.actions.audit import AuditLog  # noqa: E402
from gpuwatch_tui.actions.service import ActionService  # noqa: E402
from gpuwatch_tui.config import local_only_config  # noqa: E402
from gpuwatch_tui.config_records import Settings  # noqa: E402
from gpuwatch_tui.monitor import Monitor  # noqa: E402

GIB = 2**30
WORKER = r'''
import os, sys, time
with open("/proc/self/comm", "w") as f:
    f.write("pt_data_worker")
if sys.argv[1] == "gpu":
    import torch
    held = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
print("ready", flush=True)
while True:
    time.sleep(1)
'''
# stdout goes to a log file and torch is imported even without a GPU: what makes gpuwatch take a process
# for a job before it holds GPU memory (the probe's candidates).
MAIN = r'''
import os, subprocess, sys, time
try:
    import torch
except ImportError:
    torch = None
if sys.argv[1] == "gpu":
    held = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
worker = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1]], stdout=subprocess.PIPE)
assert worker.stdout.readline().strip() == b"ready"
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write("%d" % worker.pid)
os.replace(sys.argv[3] + ".tmp", sys.argv[3])
print("step 1/100 loss 1.0", flush=True)
while True:
    time.sleep(1)
'''


class Job:
    """The main process, by pid (it is not this script's child: nothing to wait for but its exit)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self):
        return None if alive(self.pid) else 0

    def wait(self, limit: float) -> None:
        deadline = time.monotonic() + limit
        while alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def nvml_process_mem(pid: int) -> int | None:
    """NVML's used memory of `pid` on any GPU (bytes), None when NVML does not list it."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None  # no driver here (the --cpu path)
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if p.pid == pid:
                    return int(p.usedGpuMemory or 0)
    finally:
        pynvml.nvmlShutdown()
    return None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def wait(pred, limit: float, step: float = 0.1):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        value = pred()
        if value:
            return value, time.monotonic() - t0
        await asyncio.sleep(step)
    return None, time.monotonic() - t0


def gpu_mode(force_cpu: bool) -> str:
    if force_cpu:
        return "cpu"
    try:
        import torch
        return "gpu" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


async def main(out: Path, force_cpu: bool) -> dict:
    mode = gpu_mode(force_cpu)
    result: dict = {"mode": mode, "notes": []}
    if mode == "cpu":
        result["notes"].append("no torch+CUDA (or --cpu): the workers hold no GPU memory")
    ready = out / "worker.pid"
    ready.unlink(missing_ok=True)
    # Started the way people start jobs (`nohup python ... > log &` from a shell that returns): nobody's child
    # here, so this script (a Python parent) is not taken for its launcher.
    launched = subprocess.run(
        ["sh", "-c", 'nohup "$0" -c "$1" "$2" "$3" "$4" > "$5" 2>&1 < /dev/null & echo $!',
         sys.executable, MAIN, mode, WORKER, str(ready), str(out / "main.log")],
        capture_output=True, text=True, check=True)
    job = Job(int(launched.stdout.strip()))
    worker = None
    monitor = Monitor(local_only_config(Settings(sample_interval=0.5)))
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if not ready.exists():
            result["notes"].append("the job did not start: see main.log")
            return result
        worker = int(ready.read_text())
        result.update(main_pid=job.pid, worker_pid=worker)
        await monitor.start()
        await monitor.wait_settled(30)
        host = monitor.config.hosts[0].name
        tracker = monitor.tracker

        def job_view():
            return next((v for v in tracker.views() if job.pid in v.pids), None)

        view, took = await wait(job_view, 60)
        result["job_seen_s"] = round(took, 2)
        if view is None:
            result["notes"].append("gpuwatch never showed the job")
            return result
        await asyncio.sleep(2.0)  # a few frames with the main process alive: its tree is remembered
        killed_at = time.monotonic()
        os.kill(job.pid, signal.SIGKILL)
        job.wait(10)

        def leftover():
            v = next((v for v in tracker.views() if v.leftovers is not None and worker in v.leftovers.pids), None)
            if v is None or (mode == "gpu" and not v.leftovers.gpu_memory_bytes):
                return None
            return v

        left, took = await wait(leftover, 30)
        result["leftover_seen_after_kill_s"] = round(time.monotonic() - killed_at, 2)
        if left is None:
            result["notes"].append("no leftover shown within 30 s of the kill")
            if os.environ.get("LEFTOVER_DEBUG"):
                for st in tracker.states():
                    w = st.leftovers
                    print(st.id, st.root, st.members, st.exit, w and (w.root, w.family, w.root_gone_at, w.unreported,
                                                                  w.view), file=sys.stderr)
                print(tracker.wanted(host).pids, sorted(monitor.last_samples[host].procs), file=sys.stderr)
            return result
        result["leftovers_json"] = left.leftovers.to_json()
        result["same_job"] = left.id == view.id
        result["jobs_holding_worker"] = [v.id for v in tracker.views() if worker in v.pids]
        result["nvml_worker_bytes"] = nvml_process_mem(worker)
        result["gpuwatch_worker_bytes"] = left.leftovers.gpu_memory_bytes
        fresh = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "status", "--json"], capture_output=True,
                               text=True, timeout=90, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        try:
            jobs = json.loads(fresh.stdout)["jobs"]
            result["fresh_status_leftovers"] = [j["leftovers"] for j in jobs
                                                if worker in (j.get("leftovers") or {}).get("pids", ())]
        except (ValueError, KeyError):
            result["notes"].append(f"fresh status --json failed: {fresh.stderr[-500:]}")
        service = ActionService(monitor, monitor.config.actions, AuditLog(out / "audit.jsonl"), False, "gpu-jobs")
        plan = service.plan(left.id, "reap")
        result["reap_plan"] = plan.to_json()
        reaped_at = time.monotonic()
        outcome = await service.execute(plan)
        result["reap_outcome"] = outcome.to_json()
        await wait(lambda: not alive(worker), 30)
        result["worker_gone_after_reap_s"] = round(time.monotonic() - reaped_at, 2)
        if mode == "gpu":
            await wait(lambda: nvml_process_mem(worker) is None, 30, 0.2)
            result["nvml_released_after_reap_s"] = round(time.monotonic() - reaped_at, 2)
        await wait(lambda: next((v for v in tracker.views() if v.id == left.id and v.leftovers is None),
                                          None), 30)
        result["leftovers_cleared_after_reap_s"] = round(time.monotonic() - reaped_at, 2)
        result["host"] = host
        return result
    finally:
        await monitor.stop()
        for pid in (job.pid, worker):
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGKILL)
        job.wait(10)


def summary_text(r: dict) -> str:
    lines = [f"mode: {r.get('mode')}  main pid {r.get('main_pid')}  worker pid {r.get('worker_pid')}"]
    for key in ("job_seen_s", "leftover_seen_after_kill_s", "same_job", "jobs_holding_worker",
                "nvml_worker_bytes", "gpuwatch_worker_bytes", "worker_gone_after_reap_s",
                "nvml_released_after_reap_s", "leftovers_cleared_after_reap_s"):
        if key in r:
            lines.append(f"{key}: {r[key]}")
    if "reap_outcome" in r:
        lines.append(f"reap: {r['reap_outcome']['status']}, targets "
                     f"{[t['pid'] for t in r['reap_plan']['targets']]}")
    lines += [f"note: {n}" for n in r["notes"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    found = asyncio.run(main(outdir, "--cpu" in sys.argv[2:]))
    (outdir / "summary.json").write_text(json.dumps(found, indent=1, default=str))
    (outdir / "summary.txt").write_text(summary_text(found))
    print(summary_text(found), end="")

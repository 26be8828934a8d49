"""CPU time per sample: the running gpuwatch probe vs spawning `nvidia-smi --query-gpu` once per sample.

Run on a GPU host:  python benchmarks/bench_probe_cost.py [--samples 200] [--watch 3] [--json OUT]
Anywhere:           python benchmarks/bench_probe_cost.py --fleet [--jobs 8] [--gpus 8] [--json OUT]
  --fleet: 8 GPUs from the nvidia-smi stand-in and 8 real jobs (each with a child, stdout to a
  log the probe tails), as gpuwatch asks for them; CPU per sample at 20 Hz and at 1 Hz, and
  one spawn of the stand-in (a Python script: NOT the real nvidia-smi, which costs 35.5 ms of
  CPU on an H200, results/probe-cost-h200.json).
The probe runs as gpuwatch runs it (bootstrap + shipped bundle over stdin, NVML path), sampling
every 50 ms so that its per-sample cost dominates; the processes it watches are real processes.
Both costs are read from /proc (utime+stime), the spawn cost with getrusage(RUSAGE_CHILDREN).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from gpuwatch_tui.probe.bundle import build_payload, local_argv  # noqa: E402

from bench_fleet_jobs import JobFleet, send  # noqa: E402

QUERY = ("--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
         "power.draw,power.limit,clocks.sm")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def probe_cost(samples: int, interval: float, watch: list[int], gpu_source: str) -> dict:
    proc = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(build_payload({"interval": interval, "gpu_source": gpu_source}))
    proc.stdin.write((json.dumps({"op": "want", "pids": watch, "tails": {}, "dirs": {}, "matches": {}}) + "\n").encode())
    proc.stdin.flush()
    hello = json.loads(proc.stdout.readline())
    for _ in range(5):  # warm up: first scan, NVML handles, caches
        proc.stdout.readline()
    start_cpu, start = cpu_seconds(proc.pid), time.time()
    frame = None
    for _ in range(samples):
        frame = json.loads(proc.stdout.readline())
    # The probe's own CPU only: with the nvidia-smi source, the two `nvidia-smi -lms` streams
    # it runs are separate processes and are NOT included in this figure.
    used = cpu_seconds(proc.pid) - start_cpu
    elapsed = time.time() - start
    proc.stdin.close()
    proc.wait(timeout=10)
    return {
        "gpu_source": hello["gpu_source"], "gpus": len(frame["gpus"]), "procs_reported": len(frame["procs"]),
        "samples": samples, "interval_s": interval, "elapsed_s": round(elapsed, 2),
        "cpu_ms_per_sample": round(1000 * used / samples, 3),
        "host_processes": frame.get("scanned_procs"),
    }


def run_seconds(pid: int) -> float:
    """On-CPU time of every thread, in ns from the scheduler: /proc/PID/stat counts 10 ms ticks,
    too coarse for a millisecond per sample."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


def fleet_probe_cost(fleet: JobFleet, samples: int, interval: float, repeats: int) -> dict:
    """The probe's own CPU per sample with 8 GPUs and 8 jobs (tails included), `repeats` runs."""
    runs = []
    for _ in range(repeats):
        proc = fleet.start_probe(interval)
        send(proc, {"op": "want", "pids": fleet.pids, "tails": fleet.tails(), "dirs": {}, "matches": {}})
        hello = json.loads(proc.stdout.readline())
        for _ in range(max(3, int(1.0 / interval))):  # warm up: first scan, the tails' backlog
            proc.stdout.readline()
        start_run, start_cpu, start = run_seconds(proc.pid), cpu_seconds(proc.pid), time.time()
        tail_bytes = 0
        for _ in range(samples):
            frame = json.loads(proc.stdout.readline())
            tail_bytes += sum(len(t["data"]) for t in frame["tails"])
        used_run, used_cpu = run_seconds(proc.pid) - start_run, cpu_seconds(proc.pid) - start_cpu
        elapsed = time.time() - start
        proc.stdin.close()
        proc.wait(timeout=10)
        runs.append({"cpu_ms_per_sample": round(1000 * used_run / samples, 3),
                     "cpu_ms_per_sample_ticks": round(1000 * used_cpu / samples, 2), "elapsed_s": round(elapsed, 2)})
    per = sorted(r["cpu_ms_per_sample"] for r in runs)
    return {
        "gpu_source": hello["gpu_source"], "gpus": len(frame["gpus"]), "procs_reported": len(frame["procs"]),
        "children_per_proc": [len(p["children"]) for p in frame["procs"]], "tails": len(frame["tails"]),
        "tail_b64_bytes_per_sample": round(tail_bytes / samples), "host_processes": frame.get("scanned_procs"),
        "samples": samples, "interval_s": interval, "runs": runs,
        "cpu_ms_per_sample_median": per[len(per) // 2], "cpu_ms_per_sample_min": per[0],
        "cpu_ms_per_sample_max": per[-1],
    }


def fleet_main(args) -> dict:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="gpuwatch-probe-cost-") as tmp:
        fleet = JobFleet(Path(tmp), args.jobs, args.gpus)
        try:
            time.sleep(1.0)
            result = {"note": "2 shared CPU cores (other work running); GPUs from the nvidia-smi stand-in; "
                              "probe CPU from /proc/PID/task/*/schedstat (ns)"}
            print("stage probe_20hz...", file=sys.stderr, flush=True)
            result["probe_20hz"] = fleet_probe_cost(fleet, args.samples, 0.05, args.repeats)
            print(f"  {result['probe_20hz']['cpu_ms_per_sample_median']}", file=sys.stderr, flush=True)
            print("stage probe_1hz...", file=sys.stderr, flush=True)
            result["probe_1hz"] = fleet_probe_cost(fleet, args.slow_samples, 1.0, args.repeats)
            print(f"  {result['probe_1hz']['cpu_ms_per_sample_median']}", file=sys.stderr, flush=True)
            os.environ.update(fleet.env())
            result["stand_in_spawn"] = spawn_cost(args.spawns)
            result["stand_in_spawn"]["note"] = ("the stand-in is a Python script; the real nvidia-smi "
                                                "costs 35.5 ms CPU per spawn on an H200")
        finally:
            fleet.stop()
    probe_ms = result["probe_1hz"]["cpu_ms_per_sample_median"]
    result["ratio_real_h200_spawn_vs_probe_1hz"] = round(35.548 / max(probe_ms, 1e-6), 1)
    result["ratio_stand_in_spawn_vs_probe_1hz"] = round(
        result["stand_in_spawn"]["cpu_ms_per_sample"] / max(probe_ms, 1e-6), 1)
    return result


def spawn_cost(samples: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    for _ in range(samples):
        subprocess.run(["nvidia-smi", QUERY, "--format=csv,noheader,nounits"], stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"samples": samples, "cpu_ms_per_sample": round(1000 * used / samples, 3),
            "wall_ms_per_sample": round(1000 * (time.time() - start) / samples, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--spawns", type=int, default=50)
    ap.add_argument("--slow-samples", type=int, default=30)
    ap.add_argument("--watch", type=int, default=3, help="extra real processes for the probe to watch")
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--fleet", action="store_true", help="8 GPUs (stand-in) and 8 jobs with logs")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3, help="--fleet: runs per rate (for the spread)")
    args = ap.parse_args()
    if args.fleet:
        text = json.dumps(fleet_main(args), indent=2)
        print(text)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text)
        return
    # Real processes to watch, each with a child, like a job with a worker.
    workers = [subprocess.Popen([sys.executable, "-c", "import subprocess,sys,time; subprocess.Popen(['sleep','600']); time.sleep(600)"])
               for _ in range(args.watch)]
    pids = [w.pid for w in workers]
    stages = {
        "probe_nvml": lambda: probe_cost(args.samples, 0.05, pids, "auto"),
        # 1 Hz, long enough that /proc scans (every 5 s) are amortised as in real use
        "probe_nvml_1hz": lambda: probe_cost(args.slow_samples, 1.0, pids, "auto"),
        "probe_smi_stream": lambda: probe_cost(max(20, args.samples // 4), 0.2, pids, "nvidia-smi"),
        "nvidia_smi_spawn": lambda: spawn_cost(args.spawns),
    }
    result = {}
    try:
        time.sleep(0.5)
        for name, stage in stages.items():
            print(f"stage {name}...", file=sys.stderr, flush=True)
            result[name] = stage()
            print(f"  {result[name]}", file=sys.stderr, flush=True)
    finally:
        for w in workers:
            w.kill()
    result["ratio_spawn_vs_probe"] = round(
        result["nvidia_smi_spawn"]["cpu_ms_per_sample"] / max(result["probe_nvml"]["cpu_ms_per_sample"], 1e-6), 1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

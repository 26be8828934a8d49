"""`gpuwatch export` cost: one /metrics scrape at 128 hosts x 8 GPUs x 8 jobs, and gpuwatch's CPU for
it at a 15 s scrape interval.

The store and a real JobTracker are fed synthetic probe frames: per host, 8 GPUs and 8 training
processes (one per GPU, each writing its own log file), so the tracker finds 8 jobs per host and the
collector exports their phases, progress, log age, info and per-process GPU memory, as it would live.

    PYTHONPATH=src python benchmarks/bench_prom_export.py [--hosts 128] [--gpus 8] [--scrapes 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from prometheus_client import generate_latest

from gpuwatch_tui.export.families import render

from gpuwatch_tui.export.collector import GpuwatchCollector
from gpuwatch_tui.verbs.export import CollectorRegistry
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import FdTarget, GpuProcess, GpuSample, HostSample, ProcInfo
from gpuwatch_tui.store import Store

BOOT = time.time() - 3600


def proc(host: int, i: int, started: float, cpu: float) -> ProcInfo:
    log = FdTarget(f"/scratch/run-{host:03d}-{i}/train.log", "file", append=False, size=4096)
    return ProcInfo(pid=10_000 + i, ppid=1, start_time=started, name="python3",
                    cmdline=("python3", "-u", "train.py", f"--run=run-{host:03d}-{i}", "--config=configs/llm.yaml"),
                    cwd=f"/scratch/run-{host:03d}-{i}", state="R", cpu_s=cpu, cpu_children_s=0.0,
                    rss_bytes=8 << 30, threads=24, sid=10_000 + i, pgid=10_000 + i, children=(),
                    stdout=log, stderr=log, unbuffered=True, unbuffered_reason="-u", is_python=True,
                    start_ticks=int((started - BOOT) * 100))


def frame(host: int, gpus: int, jobs: int, at: float, started: float, tick: int) -> HostSample:
    procs = {10_000 + i: proc(host, i, started, 10.0 + tick) for i in range(jobs)}
    return HostSample(time=at, gpu_source="nvml", procs=procs, cpu_count=128, load1=8.0, gpus=[
        GpuSample(i, f"GPU-{host:03d}-{i}", "NVIDIA H200", 99.0, 71230.0, 143771.0, 64.0, 689.4, 700.0, 1980.0,
                  processes=(GpuProcess(10_000 + i, 70_000.0),) if i < jobs else ())
        for i in range(gpus)])


def fleet(hosts: int, gpus: int, jobs: int, frames: int) -> tuple[Store, JobTracker]:
    names = [f"node-{h:03d}" for h in range(hosts)]
    store = Store(names, history=120)
    tracker = JobTracker()
    started = time.time() - 600
    for tick in range(frames):  # discovery holds a new job a few frames (it asks for parents first)
        now = time.time()
        for h, name in enumerate(names):
            store.set_state(name, "connected")
            sample = frame(h, gpus, jobs, now, started, tick)
            store.apply_sample(name, sample)
            tracker.update(name, sample, now)
    return store, tracker


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=128)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=8, help="jobs per host (one process on each of the first GPUs)")
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    store, tracker = fleet(args.hosts, args.gpus, args.jobs, frames=6)
    registry = CollectorRegistry(auto_describe=False)
    at = time.time()
    collector = GpuwatchCollector(store, tracker, 600.0, clock=lambda: at)  # one instant: the two encoders compared
    registry.register(collector)
    body = render(registry)
    assert body == generate_latest(registry), "the fast text differs from prometheus-client's"
    jobs = len(collector.exported_jobs(time.time()))
    walls, cpus = [], []
    for _ in range(args.scrapes):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        render(registry)  # what the export server sends
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
    walls.sort()
    wall = sum(walls) / len(walls)
    cpu = sum(cpus) / len(cpus)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    result = {
        "hosts": args.hosts, "gpus_per_host": args.gpus, "jobs_exported": jobs, "series": series,
        "body_kib": round(len(body) / 1024, 1), "scrapes": args.scrapes,
        "scrape_ms_mean": round(wall * 1000, 1), "scrape_ms_median": round(walls[len(walls) // 2] * 1000, 1),
        "scrape_ms_max": round(walls[-1] * 1000, 1), "scrape_cpu_ms_mean": round(cpu * 1000, 1),
        "cpu_pct_of_one_core_at_15s_scrapes": round(100 * cpu / 15, 3),
        "python": platform.python_version(), "cpus": "2 shared cores",
    }
    print(f"{args.hosts} hosts x {args.gpus} GPUs, {jobs} jobs: {series} series, {result['body_kib']} KiB per scrape")
    print(f"scrape: {result['scrape_ms_mean']} ms wall mean (median {result['scrape_ms_median']}, "
          f"max {result['scrape_ms_max']}), {result['scrape_cpu_ms_mean']} ms CPU")
    print(f"CPU at one scrape every 15 s: {result['cpu_pct_of_one_core_at_15s_scrapes']}% of one core "
          f"(export alone, sampling not counted)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()

"""`gpuwatch export` cost: one /metrics scrape at 128 hosts x 8 GPUs (synthetic store content, 4 GPU
processes per host, each attributed to a job), and gpuwatch's CPU for it at a 15 s scrape interval.

    PYTHONPATH=src python benchmarks/bench_prom_export.py [--hosts 128] [--gpus 8] [--scrapes 50]
"""

from __future__ import annotations

import argparse
import time

from prometheus_client import generate_latest

from gpuwatch_tui.export.collector import GpuwatchCollector
from gpuwatch_tui.export.run import CollectorRegistry
from gpuwatch_tui.model import GpuProcess, GpuSample, HostSample
from gpuwatch_tui.store import Store


def synthetic_store(hosts: int, gpus: int) -> Store:
    store = Store([f"node-{h:03d}" for h in range(hosts)], history=120)
    for h in range(hosts):
        name = f"node-{h:03d}"
        store.set_state(name, "connected")
        sample = HostSample(time=time.time(), gpu_source="nvml", procs={}, gpus=[
            GpuSample(i, f"GPU-{h:03d}-{i}", "NVIDIA H200", 99.0, 71230.0, 143771.0, 64.0, 689.4, 700.0, 1980.0,
                      processes=(GpuProcess(10_000 + i, 70_000.0),) if i < 4 else ())
            for i in range(gpus)])
        store.apply_sample(name, sample)
    return store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=128)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--scrapes", type=int, default=50)
    args = ap.parse_args()
    store = synthetic_store(args.hosts, args.gpus)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuwatchCollector(store, None, 600.0))
    body = generate_latest(registry)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(args.scrapes):
        generate_latest(registry)
    wall = (time.perf_counter() - wall0) / args.scrapes
    cpu = (time.process_time() - cpu0) / args.scrapes
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    print(f"{args.hosts} hosts x {args.gpus} GPUs: {series} series, {len(body) / 1024:.0f} KiB per scrape")
    print(f"scrape: {wall * 1000:.1f} ms wall, {cpu * 1000:.1f} ms CPU")
    print(f"CPU at one scrape every 15 s: {100 * cpu / 15:.2f}% of one core (export alone, sampling not counted)")


if __name__ == "__main__":
    main()

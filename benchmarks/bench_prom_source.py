"""A Prometheus source at fleet size: a stand-in exporter serves 500 hosts x 8 GPUs (the recorded
dcgm-exporter page's series, one copy per Hostname, only the families gpuwatch reads), a real
Prometheus scrapes it; gpuwatch finds the hosts and reads them. Reports the time to first frame
(config load with host discovery -> every host connected with its GPUs), and gpuwatch's CPU and
memory while it keeps polling. Needs the `prometheus` binary.

    PYTHONPATH=src:. python benchmarks/bench_prom_source.py [--hosts 500] [--poll-seconds 60] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import tempfile
import time
from pathlib import Path

from gpuwatch_tui.config import load_config
from gpuwatch_tui.feeds.dcgm import METRICS
from gpuwatch_tui.monitor import Monitor
from tests.prom.support import RECORDED_HOST, PrometheusServer, TextExporter, recorded_dcgm


def fleet_page(hosts: int) -> str:
    base = [line for line in recorded_dcgm().splitlines()
            if line.startswith("#") or line.split("{", 1)[0] in METRICS]
    page = []
    for h in range(hosts):
        name = f"gpu-node-{h:03d}"
        page += [line.replace(f'Hostname="{RECORDED_HOST}"', f'Hostname="{name}"') for line in base
                 if not line.startswith("#")]
    return "\n".join(page) + "\n"


async def watch(config_path: Path, hosts: int, poll_seconds: float) -> dict:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    config = load_config(str(config_path))
    monitor = Monitor(config)
    await monitor.start()
    try:
        while sum(1 for r in monitor.store.hosts.values() if r.state == "connected" and len(r.gpus) == 8) < hosts:
            await asyncio.sleep(0.05)
        first = time.perf_counter() - wall0
        cpu_first = time.process_time() - cpu0
        print(f"time to first frame, {hosts} hosts x 8 GPUs: {first:.2f} s ({cpu_first:.2f} s CPU; "
              f"{len(config.hosts)} hosts found)")
        cpu1, wall1 = time.process_time(), time.perf_counter()
        await asyncio.sleep(poll_seconds)
        cpu = time.process_time() - cpu1
        wall = time.perf_counter() - wall1
        print(f"steady polling ({config.sources[0].interval:g} s interval): {100 * cpu / wall:.1f}% of one core "
              f"over {wall:.0f} s")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"max RSS: {rss:.0f} MiB")
        return {"hosts": hosts, "gpus_per_host": 8, "hosts_found": len(config.hosts),
                "time_to_first_frame_s": round(first, 2), "cpu_to_first_frame_s": round(cpu_first, 2),
                "poll_interval_s": config.sources[0].interval, "steady_seconds": round(wall, 1),
                "steady_cpu_pct_of_one_core": round(100 * cpu / wall, 2), "max_rss_mib": round(rss),
                "cpus": "2 shared cores"}
    finally:
        await monitor.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--poll-seconds", type=float, default=60)
    ap.add_argument("--interval", default="5s")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-prom-"))
    exporter = TextExporter(fleet_page(args.hosts)).start()
    prom = PrometheusServer(work, [{"job": "dcgm", "address": exporter.address}], scrape_interval=args.interval)
    prom.start()
    try:
        prom.wait_query("count(DCGM_FI_DEV_FB_USED)", lambda r: r and float(r[0]["value"][1]) == 8 * args.hosts, 60)
        time.sleep(10)  # a few scrapes for the backfill
        cfg = work / "hosts.toml"
        cfg.write_text(f'[[sources]]\nkind = "prometheus"\nurl = "{prom.url}"\ninterval = "{args.interval}"\n'
                       f'backfill = 30\n')
        result = asyncio.run(watch(cfg, args.hosts, args.poll_seconds))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    finally:
        prom.stop()
        exporter.stop()


if __name__ == "__main__":
    main()

"""Connect-to-first-sample for 16 hosts on loopback sshd (goal: <= 2 s).

Starts 16 real OpenSSH sshd hosts (127.0.0.2 ..) with the fake nvidia-smi replaying H200
recordings, then runs the real Monitor (asyncssh, shipped probe) and times, from
Monitor.start(), when each host delivers its first sample.

    python benchmarks/bench_connect.py [--hosts 16] [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.config import parse_config  # noqa: E402
from gpuwatch_tui.monitor import Monitor  # noqa: E402
from tests.support.sshd import ClientKeys, SshdFactory  # noqa: E402

GOAL_S = 2.0


async def one_run(factory: SshdFactory, hosts, interval: float, gpu_source: str = "nvidia-smi") -> dict:
    env = factory.env
    cfg = parse_config({
        "settings": {"sample_interval": interval, "ssh_config": [str(env.ssh_config)],
                     "known_hosts": str(env.known_hosts), "connect_timeout": 10},
        "hosts": [{"name": h.name, "ssh": h.name, "gpu_source": gpu_source} for h in hosts],
    }, "bench.toml")
    monitor = Monitor(cfg)
    first: dict[str, float] = {}
    steps: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    m0 = time.monotonic()
    cpu0 = time.process_time()

    def on_change() -> None:
        now = time.perf_counter()
        for name, session in monitor.sessions.items():
            if name not in steps and "hello" in session.timeline:
                steps[name] = {k: v - m0 for k, v in session.timeline.items()}
        for name, rec in monitor.store.hosts.items():
            if name not in first and rec.last_sample_time is not None:
                first[name] = now - t0

    monitor.subscribe(on_change)
    await monitor.start()
    try:
        deadline = time.perf_counter() + 30
        while len(first) < len(hosts) and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        all_s = time.perf_counter() - t0
        client_cpu_s = time.process_time() - cpu0
        states = {n: (r.state, r.error) for n, r in monitor.store.hosts.items() if n not in first}
    finally:
        t_stop = time.perf_counter()
        await monitor.stop()
        stop_s = time.perf_counter() - t_stop
    per = sorted(first.values())

    def med(step: str) -> float | None:
        vals = [v[step] for v in steps.values() if step in v]
        return round(statistics.median(vals), 3) if vals else None

    return {
        "hosts": len(hosts), "with_sample": len(first), "all_first_sample_s": round(all_s, 3),
        "p50_s": round(statistics.median(per), 3) if per else None,
        "max_s": round(max(per), 3) if per else None,
        "min_s": round(min(per), 3) if per else None,
        "stop_s": round(stop_s, 3), "failed": states,
        "client_cpu_s": round(client_cpu_s, 3),
        # medians over hosts, seconds from Monitor.start(): SSH login done, probe shipped, probe's hello
        "median_ssh_s": med("ssh"), "median_probe_sent_s": med("probe_sent"), "median_hello_s": med("hello"),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--gpu-source", default="nvidia-smi", choices=("auto", "nvml", "nvidia-smi", "none"))
    parser.add_argument("--json", metavar="FILE", help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuwatch-bench-") as tmp:
        keys = ClientKeys(Path(tmp) / "keys")
        factory = SshdFactory(Path(tmp) / "sshd", keys)
        try:
            t = time.perf_counter()
            hosts = factory(args.hosts)
            for i, h in enumerate(hosts):
                h.set_scenario(gpus=8, phase="training" if i % 2 else "idle", uuid_prefix=f"GPU-{h.name}")
            setup_s = time.perf_counter() - t
            runs = [asyncio.run(one_run(factory, hosts, args.interval, args.gpu_source)) for _ in range(args.runs)]
        finally:
            problems = factory.teardown()
    import os

    result = {
        "bench": "connect-to-first-sample", "goal_s": GOAL_S, "hosts": args.hosts, "gpus_per_host": 8,
        "gpu_source": args.gpu_source,
        "cpus": os.cpu_count(), "sshd_setup_s": round(setup_s, 2), "runs": runs,
        "all_first_sample_s_median": statistics.median(r["all_first_sample_s"] for r in runs),
        "leaks": problems,
    }
    result["met"] = result["all_first_sample_s_median"] <= GOAL_S and all(
        r["with_sample"] == r["hosts"] for r in runs)
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Key -> frame latency of the real dashboard while one of three real sshd hosts is faulty.

The same set-up as tests/faults/test_dashboard_under_faults.py (GpuwatchApp over a MonitorSource
over a Monitor; three sshd hosts on loopback, the faulty one behind a TCP relay; one configured
job per host), with more presses. Per fault: p50/p95/max of
  shown    key handed to the app -> first frame (rendered to terminal bytes) showing its effect
  handled  key handed to the app -> its effect in the app's state (polled every ms)
Keys: down, up, tab, shift+tab, enter (opens the job), escape (back), repeated.
Faults: none (baseline), sshd SIGKILLed (keys pressed while the host is down and being retried),
probe SIGKILLed (keys pressed from the moment of the kill, through the reconnect), relay +500 ms.
The load average is printed: on shared cores it moves the figures more than the faults do, so
--runs N repeats the whole measurement and reports each figure's median over the runs.
--out keeps the file's "round*" entries (before/after notes of earlier work) and replaces the rest.
    python benchmarks/bench_faults_dashboard.py [--rounds 10] [--runs 3] [--out results/faults-dashboard.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.core.helpers import host_entry, probes_on, wait_for  # noqa: E402
import tests.faults.dashboard_faults as shared  # noqa: E402
from tests.faults.dashboard_faults import dashboard, key_round, percentile  # noqa: E402


async def _at_least(pilot, predicate, timeout: float, what: str):
    """The shared helper waits for exactly one job per host; on a machine shared with other test
    runs, their processes can show up as extra jobs on these loopback hosts (one /proc). The
    figures only need this dashboard's own jobs present, so a larger table is fine here."""
    if " jobs in the table" in what:  # "3 jobs in the table: [...]"
        table = next(iter(pilot.app.screen.query("JobsTable")))
        expected = int(what.split()[0])
        return await _wait_screen(pilot, lambda: table.row_count >= expected, timeout, what)
    return await _wait_screen(pilot, predicate, timeout, what)


_wait_screen = shared.wait_screen
shared.wait_screen = _at_least
from tests.faults.fleet import relayed_entry  # noqa: E402
from tests.support.relay import TcpRelay  # noqa: E402
from tests.support.sshd import ClientKeys, SshdFactory  # noqa: E402

TARGET_P95_MS = 100  # the goal


def figures(values: list[float]) -> dict:
    return {"p50_ms": round(percentile(values, 0.5) * 1000, 1), "p95_ms": round(percentile(values, 0.95) * 1000, 1),
            "max_ms": round(max(values) * 1000, 1)}


async def measure(fault: str, ssh_env, hosts, relay, rounds: int) -> dict:
    a, b, c = hosts
    entries = [relayed_entry("far", a, relay, ssh_env), host_entry(b), host_entry(c)]
    load_before = os.getloadavg()[0]
    async with dashboard(ssh_env, entries) as (app, pilot, log, clock):
        if fault == "sshd killed":
            a.kill()
            await wait_for(lambda: app.source.store.hosts["far"].state != "connected", 10, what="far down")
        elif fault == "probe killed":
            probe = max(probes_on(b), key=lambda p: p.create_time())  # this dashboard's, not a leaving one
            probe.kill()
        elif fault == "relay +500 ms":
            relay.delay(0.5)
            await asyncio.sleep(2.0)
        await key_round(app, clock, rounds)
        if fault == "sshd killed":
            a.start()
        relay.pass_through()
    shown = [s for _, _, s in clock.log]
    handled = [h for _, h, _ in clock.log]
    per_key = {k: figures([s for key, _, s in clock.log if key == k]) for k in dict.fromkeys(k for k, _, _ in clock.log)}
    return {"fault": fault, "presses": len(shown), "shown": figures(shown), "handled": figures(handled),
            "shown_per_key": per_key,
            "load1_before": round(load_before, 2), "load1_after": round(os.getloadavg()[0], 2)}


async def main_async(rounds: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="gpuwatch-bench-faults-") as tmp:
        factory = SshdFactory(Path(tmp) / "sshd", ClientKeys(Path(tmp) / "keys"))
        relay = None
        try:
            hosts = factory(3)
            relay = TcpRelay(hosts[0].address, hosts[0].port).start()
            factory.env.add_known_host("127.0.0.1", relay.port, hosts[0])
            out = []
            for fault in ("none", "sshd killed", "probe killed", "relay +500 ms"):
                result = await measure(fault, factory.env, hosts, relay, rounds)
                s, h = result["shown"], result["handled"]
                print(f"{fault:>14}: {result['presses']} keys  shown p50 {s['p50_ms']:6.1f} ms  p95 {s['p95_ms']:6.1f} ms"
                      f"  max {s['max_ms']:6.1f} ms | handled p50 {h['p50_ms']:6.1f} p95 {h['p95_ms']:6.1f} ms"
                      f" | load {result['load1_before']}->{result['load1_after']}", flush=True)
                print("                " + "  ".join(f"{k} {v['p50_ms']:.0f}/{v['p95_ms']:.0f}"
                                                      for k, v in result["shown_per_key"].items()) + " (p50/p95 ms)")
                out.append(result)
            return out
        finally:
            if relay is not None:
                relay.close()
            problems = factory.teardown()
            if problems:
                print("leftovers:", *problems, sep="\n  ")


def medians(runs: list[list[dict]]) -> list[dict]:
    """Per fault, each figure's median over the runs (one run: that run), with every run's p95."""
    out = []
    for per_fault in zip(*runs):
        first = per_fault[0]
        merged = {"fault": first["fault"], "runs": len(per_fault), "presses": sum(r["presses"] for r in per_fault)}
        for part in ("shown", "handled"):
            merged[part] = {k: round(statistics.median(r[part][k] for r in per_fault), 1) for k in first[part]}
        merged["shown_p95_ms_per_run"] = [r["shown"]["p95_ms"] for r in per_fault]
        merged["shown_per_key"] = {key: {k: round(statistics.median(r["shown_per_key"][key][k] for r in per_fault), 1)
                                         for k in first["shown_per_key"][key]} for key in first["shown_per_key"]}
        merged["load1"] = [[r["load1_before"], r["load1_after"]] for r in per_fault]
        out.append(merged)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of 6 keys per fault")
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole measurement; figures are medians")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        if args.runs > 1:
            print(f"-- run {n + 1} of {args.runs}", flush=True)
        runs.append(asyncio.run(main_async(args.rounds)))
    results = medians(runs)
    if args.runs > 1:
        print(f"medians over {args.runs} runs:")
        for r in results:
            s = r["shown"]
            print(f"{r['fault']:>14}: shown p50 {s['p50_ms']:6.1f} ms  p95 {s['p95_ms']:6.1f} ms  max {s['max_ms']:6.1f} ms"
                  f"  (p95 per run {r['shown_p95_ms_per_run']})")
    worst = max(r["shown"]["p95_ms"] for r in results)
    print(f"worst p95 {worst} ms (goal {TARGET_P95_MS} ms); {os.cpu_count()} CPUs")
    if args.out:
        out = Path(args.out)
        kept = {}
        if out.exists():  # earlier rounds' before/after notes stay
            kept = {k: v for k, v in json.loads(out.read_text()).items() if k.startswith("round")}
        out.write_text(json.dumps({"cpus": os.cpu_count(), "goal_p95_ms": TARGET_P95_MS, "runs": args.runs,
                                   "results": results, **kept}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time from one rank of a 2-node job stopping to gpuwatch naming it.

The same setup as tests/multinode: two real sshd "nodes" (127.0.0.2, 127.0.0.3), each in its own PID,
UTS and mount namespace, a real 2-node torchrun (gloo on CPU, c10d rendezvous) with one agent started
through each node's sshd, and the real Monitor over SSH. Per run: wait until gpuwatch shows one job over
both nodes and both ranks log steps, SIGSTOP rank 1 (by pid), then time
  - named_s:   until the job's first evidence line names the stopped rank,
  - stalled_s: until the job is also judged stalled (one stopped rank stops every collective),
then kill the job through gpuwatch (both nodes) and time that too.

    python benchmarks/bench_multinode_culprit.py [--runs 3] [--interval 0.2] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.actions.audit import AuditLog  # noqa: E402
from gpuwatch_tui.actions.service import ActionService  # noqa: E402
from gpuwatch_tui.actions.settings import ActionSettings  # noqa: E402
from gpuwatch_tui.jobs.multinode import STOPPED_GRACE_S  # noqa: E402
from tests.multinode import cluster  # noqa: E402
from tests.support.sshd import ClientKeys, SshdFactory  # noqa: E402

NAMED = "rank 1 on node-b: process stopped (T)"


def joined(monitor):
    return [v for v in monitor.tracker.views() if v.multi_node]


async def until(pred, timeout: float, step: float = 0.01):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError
        await asyncio.sleep(step)


async def one_run(factory: SshdFactory, nodes, work: Path, interval: float, stall_after: float) -> dict:
    run_dir = work / f"run-{time.monotonic_ns()}"
    t_launch = time.monotonic()
    cluster.launch(factory.env, nodes, run_dir)
    ranks = cluster.ranks(nodes)
    monitor = cluster.monitor_for(factory.env, nodes, stall_after)
    await monitor.start()
    try:
        await until(lambda: joined(monitor) and len(joined(monitor)[0].ranks) == 2
                    and cluster.steps_logged(run_dir, "node-b") >= 3, 60)
        seen_s = time.monotonic() - t_launch
        victim = next(r for r in ranks if r.node == "node-b")
        os.kill(victim.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        await until(lambda: (j := joined(monitor)) and j[0].evidence and j[0].evidence[0].startswith(NAMED), 30)
        named = time.monotonic() - t0
        await until(lambda: (j := joined(monitor)) and j[0].phase == "stalled"
                    and j[0].evidence[0].startswith(NAMED), 30)
        stalled = time.monotonic() - t0
        job = joined(monitor)[0]
        service = ActionService(monitor, ActionSettings(kill_grace_s=1.0, kill_wait_s=2.0),
                                AuditLog(work / "state" / "audit.jsonl"), False, "bench")
        t1 = time.monotonic()
        outcome = await service.execute(service.plan(job.id, "kill"))
        await until(lambda: not cluster.all_processes(nodes), 15, 0.05)
        killed = time.monotonic() - t1
        return {"launch_to_one_job_s": round(seen_s, 2), "named_s": round(named, 3), "stalled_s": round(stalled, 3),
                "kill_both_nodes_s": round(killed, 2), "kill_ok": outcome.ok, "evidence": job.evidence[0],
                "phase": f"{job.phase} ({job.detail})"}
    finally:
        await monitor.stop()
        cluster.stop_run(nodes)


async def main_async(args) -> dict:
    reason = cluster.nodes_unavailable()
    if reason:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        factory = SshdFactory(work / "sshd", ClientKeys(work / "keys"))
        try:
            nodes = cluster.start_nodes(factory, work)
            runs = [await one_run(factory, nodes, work, args.interval, args.stall_after) for _ in range(args.runs)]
        finally:
            cluster.stop_nodes(factory.hosts)
            factory.teardown()
    named = [r["named_s"] for r in runs]
    stalled = [r["stalled_s"] for r in runs]
    return {
        "bench": "multinode-culprit",
        "setup": "2 sshd nodes on 127.0.0.2/.3 in their own PID/UTS/mount namespaces; torchrun --nnodes 2 "
                 "--nproc_per_node 1 (gloo, CPU, c10d rendezvous), one agent per node over its sshd with "
                 "SLURM_JOB_ID; rank 1 SIGSTOPped by pid",
        "sample_interval_s": args.interval,
        "stall_after_s": args.stall_after,
        "stopped_grace_s": STOPPED_GRACE_S,
        "cpus": os.cpu_count(),
        "named_median_s": round(statistics.median(named), 3),
        "named_max_s": max(named),
        "stalled_median_s": round(statistics.median(stalled), 3),
        "stalled_max_s": max(stalled),
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval", type=float, default=0.2, help="sample_interval of the monitor (s)")
    ap.add_argument("--stall-after", type=float, default=3.0)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "multinode-culprit.json")
    args = ap.parse_args()
    result = asyncio.run(main_async(args))
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()

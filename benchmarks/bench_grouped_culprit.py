"""Time from the dump key to the grouped verdict on 2, 8 and 32 gloo ranks over two sshd nodes; and the size
of an incident bundle for a 10-minute window.

Setup as tests/multinode: two real sshd "nodes" (127.0.0.2, 127.0.0.3) in their own PID/UTS/mount namespaces,
a real 2-node torchrun (gloo on CPU) with N/2 ranks per node running tests/multinode/scripts/ddp_wedge.py with
the flight recorder on, the real Monitor over SSH. Per N: wait until gpuwatch shows one job of N ranks and the
ranks step, wedge the last rank outside torch (the others then wait, idle, in the all-reduce: 32 busy ranks
would not fit 2 cores), wait until no step is logged, then time what the `d` key does (ActionService.plan +
execute of dump_stack over both nodes: py-spy of every rank, every rank's flight recorder, NCCL RAS, the
grouping) until the report's groups are there; then a second dump (stuck or moving).

--bundle-minutes M: record the Monitor while an 8-rank job runs (and wedges half-way) for M minutes, dump it,
then write the bundle of the last 10 minutes from that recording and report its size.

    python benchmarks/bench_grouped_culprit.py [--ranks 2 8 32] [--bundle-minutes 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.actions import collective_evidence  # noqa: E402
from gpuwatch_tui.actions.audit import AuditLog  # noqa: E402
from gpuwatch_tui.actions.service import ActionService  # noqa: E402
from gpuwatch_tui.actions.settings import ActionSettings  # noqa: E402
from gpuwatch_tui.config import parse_config  # noqa: E402
from gpuwatch_tui.monitor import Monitor  # noqa: E402
from tests.core.helpers import host_entry, settings_for  # noqa: E402
from tests.multinode import cluster  # noqa: E402
from tests.support.sshd import ClientKeys, SshdFactory  # noqa: E402

SCRIPT = ROOT / "tests" / "multinode" / "scripts" / "ddp_wedge.py"


def joined(monitor):
    return [v for v in monitor.tracker.views() if v.multi_node]


async def until(pred, timeout: float, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError
        await asyncio.sleep(step)


def steps(run_dir: Path) -> int:
    return cluster.steps_logged(run_dir, "node-a") + cluster.steps_logged(run_dir, "node-b")


async def quiet(run_dir: Path, seconds: float, timeout: float) -> None:
    last, since = steps(run_dir), time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() - since < seconds:
        if time.monotonic() > deadline:
            raise TimeoutError("the ranks kept stepping")
        await asyncio.sleep(0.2)
        n = steps(run_dir)
        if n != last:
            last, since = n, time.monotonic()


def monitor_for(factory, nodes, interval: float) -> Monitor:
    cfg = parse_config({"settings": settings_for(factory.env, stall_after=3.0, sample_interval=interval),
                        "hosts": [host_entry(n, gpu_source="none") for n in nodes]}, "bench.toml")
    return Monitor(cfg)


def launch(factory, nodes, work: Path, n: int) -> Path:
    run_dir = work / f"run-{n}-{time.monotonic_ns()}"
    run_dir.mkdir(parents=True)
    env = {"TORCH_FR_BUFFER_SIZE": "200", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(run_dir / "frpipe_"),
           "TORCH_FR_DUMP_TEMP_FILE": str(run_dir / "frdump_"), "WEDGE_FILE": str(run_dir / "wedge"),
           "WEDGE_RANK": str(n - 1), "WANDB_API_KEY": "bench-secret-not-to-leak"}
    cluster.launch(factory.env, nodes, run_dir, nproc_per_node=n // 2, script=SCRIPT, extra_env=env)
    return run_dir


async def one_size(factory, nodes, work: Path, n: int, interval: float) -> dict:
    t_launch = time.monotonic()
    run_dir = launch(factory, nodes, work, n)
    cluster.ranks(nodes, 300, per_node=n // 2, script=SCRIPT)
    monitor = monitor_for(factory, nodes, interval)
    await monitor.start()
    try:
        await until(lambda: joined(monitor) and len(joined(monitor)[0].ranks) == n and steps(run_dir) >= 2 * n, 600)
        started_s = time.monotonic() - t_launch
        (run_dir / "wedge").write_text("")
        await quiet(run_dir, 2.0, 120)
        job = joined(monitor)[0]
        service = ActionService(monitor, ActionSettings(), AuditLog(work / "state" / "audit.jsonl"), False, "bench")
        t0 = time.monotonic()
        plan = service.plan(job.id, "dump_stack")
        report = (await service.execute(plan)).report
        grouped_s = time.monotonic() - t0
        t1 = time.monotonic()
        again = (await service.execute(service.plan(job.id, "dump_stack"))).report
        redump_s = time.monotonic() - t1
        fr = collective_evidence.fr_analysis(report.fr_records)
        return {"ranks": n, "per_node": n // 2, "launch_to_stepping_s": round(started_s, 1),
                "key_to_grouped_verdict_s": round(grouped_s, 2), "second_dump_s": round(redump_s, 2),
                "groups": [g.text for g in report.analysis.groups], "motion": again.motion,
                "flight_recorder": fr.summary if fr else None,
                "suspect_right": [g.ranks for g in report.analysis.groups if g.suspect] == [(n - 1,)]}
    finally:
        await monitor.stop()
        cluster.stop_run(nodes)
        await until(lambda: not cluster.all_processes(nodes), 60, 0.2)


async def bundle_window(factory, nodes, work: Path, minutes: float, interval: float) -> dict:
    from gpuwatch_tui.incident_bundle import write_bundle
    from gpuwatch_tui.recording.recorder import Recorder
    from gpuwatch_tui.recording.timeline import Replay, ReplayMonitor, Timeline

    n = 8
    run_dir = launch(factory, nodes, work, n)
    cluster.ranks(nodes, 300, per_node=n // 2, script=SCRIPT)
    monitor = monitor_for(factory, nodes, interval)
    recording = work / "bench.jsonl.gz"
    recorder = Recorder(monitor, recording)
    await monitor.start()
    recorder.open()
    stop = asyncio.Event()
    task = asyncio.create_task(recorder.run(interval, stop))
    t0 = time.monotonic()
    try:
        await until(lambda: joined(monitor) and len(joined(monitor)[0].ranks) == n, 600)
        await asyncio.sleep(max(0.0, minutes * 60 / 2 - (time.monotonic() - t0)))
        (run_dir / "wedge").write_text("")
        await quiet(run_dir, 2.0, 120)
        job = joined(monitor)[0]
        service = ActionService(monitor, ActionSettings(), AuditLog(work / "state" / "audit.jsonl"), False, "bench")
        await service.execute(service.plan(job.id, "dump_stack"))
        await asyncio.sleep(max(0.0, minutes * 60 - (time.monotonic() - t0)))
    finally:
        stop.set()
        await task
        recorder.close()
        await monitor.stop()
        cluster.stop_run(nodes)
    timeline = Timeline.open(recording)
    replay = Replay(timeline, timeline.history)
    replay.seek(timeline.end)
    part = next(v for v in timeline.jobs_at(timeline.end) if v.host == "node-a")
    t1 = time.monotonic()
    path = write_bundle(ReplayMonitor(replay), "node-a", part.name, work / "bundles", recordings=[recording],
                        window_s=600, now=timeline.end, dumps_dir=service.dumps_dir())
    import zipfile
    with zipfile.ZipFile(path) as z:
        members = {i.filename: i.compress_size for i in z.infolist()}
        leaked = any(b"bench-secret-not-to-leak" in z.read(m) for m in members if not m.endswith(".gz"))
    return {"recorded_s": round(timeline.end - timeline.start, 1), "recording_bytes": recording.stat().st_size,
            "bundle_bytes": path.stat().st_size, "bundle_members": members, "write_bundle_s": round(time.monotonic() - t1, 2),
            "sample_interval_s": interval, "ranks": n, "secret_leaked": leaked}


async def main_async(args) -> dict:
    reason = cluster.nodes_unavailable()
    if reason:
        raise SystemExit(reason)
    out: dict = {"bench": "grouped-culprit", "cpus": os.cpu_count(), "sizes": [], "bundle": None,
                 "setup": __doc__.split("\n\n")[1].replace("\n", " ")}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        factory = SshdFactory(work / "sshd", ClientKeys(work / "keys"))
        try:
            nodes = cluster.start_nodes(factory, work)
            for n in args.ranks:
                out["sizes"].append(await one_size(factory, nodes, work, n, args.interval))
                print(json.dumps(out["sizes"][-1]), flush=True)
            if args.bundle_minutes:
                out["bundle"] = await bundle_window(factory, nodes, work, args.bundle_minutes, 1.0)
                print(json.dumps(out["bundle"]), flush=True)
        finally:
            cluster.stop_nodes(factory.hosts)
            factory.teardown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 8, 32])
    ap.add_argument("--interval", type=float, default=0.5, help="sample_interval of the monitor (s)")
    ap.add_argument("--bundle-minutes", type=float, default=0.0)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "grouped-culprit.json")
    args = ap.parse_args()
    result = asyncio.run(main_async(args))
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "setup"}, indent=1))


if __name__ == "__main__":
    main()

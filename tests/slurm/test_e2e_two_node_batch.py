"""Issue #13 end to end: a real Slurm batch job (`sbatch -N 2`) whose srun step starts a 2-node torchrun
(gloo, CPU), each node's slurmd living in the namespaces of one sshd test "node" (tests/multinode), so
srun puts each rank where that node's probe sees it. The test stops rank 1 (SIGSTOP, by pid); gpuwatch,
configured with [slurm] (login = local) and the Slurm nodes mapped to the sshd hosts, shows ONE job over
both hosts, stalled, with the stopped rank named; the log it tails is the path Slurm expanded (%j, %N),
read from Slurm; kill is scancel: the job leaves the queue and the ranks are gone on both nodes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuwatch_tui.actions.audit import AuditLog
from gpuwatch_tui.actions.service import ActionService
from gpuwatch_tui.actions.settings import ActionSettings
from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.slurm.hosts import with_slurm_jobs
from gpuwatch_tui.slurm.run import make_watch

from tests.core.helpers import settings_for, wait_for
from tests.multinode import cluster as nodes_mod
from tests.support.net import free_port
from tests.support.services import service_missing

from .cluster import SlurmCluster, slurm_unavailable_reason

NODES = {"gwnode1": "node-a", "gwnode2": "node-b"}  # Slurm node -> the sshd test node it lives in
STALL_AFTER = 3.0


def _pid_ns(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


@pytest.fixture
def slurm_in_nodes(sshd_factory, tmp_path):
    reason = (slurm_unavailable_reason() or nodes_mod.nodes_unavailable()
              or (None if shutil.which("nsenter") else "nsenter (util-linux) is missing"))
    if reason:
        service_missing("Slurm with namespaced test nodes", reason)
    nodes = nodes_mod.start_nodes(sshd_factory, tmp_path)
    # Each node's sshd is pid 1 of that node's namespaces (unshare's child, which exec'd it).
    ns_root = {n.name: psutil.Process(n.pid).children()[0].pid for n in nodes}
    prefix = {slurm: ["nsenter", "--target", str(ns_root[node]), "--pid", "--mount", "--uts", "--"]
              for slurm, node in NODES.items()}
    c = SlurmCluster(tmp_path / "slurm", nodes=2, node_prefix=prefix, node_hostname=dict(NODES))
    c.dir.mkdir()
    try:
        c.start()
        yield c, nodes, {n.name: _pid_ns(ns_root[n.name]) for n in nodes}
    finally:
        c.stop()
        nodes_mod.stop_nodes(nodes)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc})"


def rank_procs(ns_of: dict[str, str]) -> dict[str, psutil.Process]:
    """node -> its rank process (the training script's, not torchrun's), found by cmdline and pid namespace."""
    out = {}
    for p in psutil.process_iter():
        try:
            cmd = p.cmdline()
            if str(nodes_mod.SCRIPT) in cmd and "torch.distributed.run" not in cmd:
                ns = _pid_ns(p.pid)
                out.update((node, p) for node, n in ns_of.items() if n == ns)
        except (psutil.Error, OSError):
            continue
    return out


def test_slurm_batch_job_over_two_nodes(slurm_in_nodes, ssh_env, tmp_path, monkeypatch):
    c, nodes, ns_of = slurm_in_nodes
    monkeypatch.setenv("SLURM_CONF", str(c.conf))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    port = free_port("127.0.0.1")
    agent = (f"exec {sys.executable} -m torch.distributed.run --nnodes 2 --nproc_per_node 1 "
             f"--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:{port} --rdzv_id slurm-$SLURM_JOB_ID "
             f"--max_restarts 0 {nodes_mod.SCRIPT}")
    job = c.sbatch("-N", "2", "--job-name=ddp", "--time=5", "-o", "ddp-%j-%N.out",
                   "--export=ALL,OMP_NUM_THREADS=1",
                   script=f"srun --ntasks-per-node=1 sh -c '{agent}'")
    submitted = time.monotonic()
    c.wait_state(job, {"RUNNING"})
    figures: dict[str, float | str] = {}
    expected_log = c.jobs_dir / f"ddp-{job}-node-a.out"  # %N: the batch node's host name
    ranks: dict[str, psutil.Process] = {}

    async def scenario():
        config = parse_config({
            "settings": settings_for(ssh_env, stall_after=STALL_AFTER),
            "slurm": {"login": "local", "user": "root", "node_jump": "none",
                      "node_address": {slurm: node for slurm, node in NODES.items()}},
        }, "t.toml")
        # Only the nodes are watched: this machine (the login node here) sees every node's processes.
        config = dataclasses.replace(config, hosts=())
        watch = make_watch(config)
        await watch.poll()
        slurm_job = watch.queue[job]
        assert slurm_job.nodes == ("gwnode1", "gwnode2") and slurm_job.stdout == str(expected_log), slurm_job
        monitor = Monitor(with_slurm_jobs(config, watch.running()))
        await monitor.start()
        try:
            def joined():
                return [v for v in monitor.tracker.views() if v.multi_node]

            await wait_for(lambda: len(rank_procs(ns_of)) == 2, 40, 0.2, "a rank on each node")
            ranks.update(rank_procs(ns_of))
            try:
                await wait_for(lambda: (j := joined()) and len(j[0].ranks) == 2 and j[0].phase == "training"
                               and "step 3" in expected_log.read_text(errors="replace"), 40, 0.1,
                               "one training job over both nodes")
            except AssertionError:
                raise AssertionError(f"ranks: {[(v.hosts, v.ranks) for v in joined()]} views: {monitor.tracker.views()}\nlog: {_read(expected_log)[-800:]}\n"
                                     f"hosts: {[(h, r.state) for h, r in monitor.store.hosts.items()]}") from None
            figures["submit_to_one_job_s"] = time.monotonic() - submitted
            views = monitor.tracker.views()
            assert len([v for v in views if set(v.hosts or (v.host,)) & set(NODES)]) == 1, views
            view = joined()[0]
            assert view.hosts == ("gwnode1", "gwnode2") and view.run_key == f"slurm job {job}", view
            assert [(r.rank, r.host) for r in view.ranks] == [(0, "gwnode1"), (1, "gwnode2")], view.ranks
            assert {(r.host, r.pid) for r in view.ranks} == {
                (slurm, nodes_mod.ns_pid(ranks[node].pid)) for slurm, node in NODES.items()}
            # The log gpuwatch tails is the one Slurm named (nothing configured it).
            assert str(expected_log) in view.logs, view.logs

            victim = ranks["node-b"]
            os.kill(victim.pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            named = "rank 1 on gwnode2: process stopped (T)"
            await wait_for(lambda: (j := joined()) and j[0].evidence and j[0].evidence[0].startswith(named),
                           30, 0.05, "the stopped rank named")
            figures["named_s"] = time.monotonic() - stopped_at
            await wait_for(lambda: (j := joined()) and j[0].phase == "stalled" and j[0].evidence[0].startswith(named),
                           30, 0.05, "the job stalled with the stopped rank named")
            figures["stalled_s"] = time.monotonic() - stopped_at
            view = joined()[0]
            assert [r.rank for r in view.ranks if r.culprit] == [1], view.ranks
            figures.update(evidence=view.evidence[0], phase=f"{view.phase} ({view.detail})")
            print(f"culprit named {figures['named_s']:.2f} s, stalled {figures['stalled_s']:.2f} s after the stop: "
                  f"{view.evidence[0]}")

            # Kill is scancel: Slurm ends every rank on both nodes and frees the allocation.
            await watch.poll()
            service = ActionService(monitor, ActionSettings(kill_grace_s=1.0, kill_wait_s=2.0),
                                    AuditLog(tmp_path / "state" / "audit.jsonl"), False, "ana", slurm=watch)
            plan = service.plan(view.id, "kill")
            assert plan.slurm_cancel is not None and plan.slurm_cancel.argv[-1] == job, plan
            cancelled_at = time.monotonic()
            done = await service.execute(plan)
            assert done.ok, done.summary()
            await wait_for(lambda: not c.run(["squeue", "-h", "-j", job], check=False).stdout.strip(), 20, 0.2,
                           "the job out of the queue")
            await wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                           for p in ranks.values()) and not rank_procs(ns_of), 20, 0.2,
                           "the ranks gone on both nodes")
            figures["scancel_to_ranks_gone_s"] = time.monotonic() - cancelled_at
        finally:
            await monitor.stop()

    try:
        asyncio.run(scenario())
    finally:
        for p in ranks.values():  # a stopped rank keeps its signals until continued
            try:
                os.kill(p.pid, signal.SIGCONT) if p.is_running() else None
            except (ProcessLookupError, psutil.Error):
                pass
        c.run(["scancel", job], check=False)
    out = os.environ.get("GPUWATCH_BENCH_OUT")
    if out:  # benchmarks/bench_slurm_e2e.py collects the figures of each run from here
        Path(out).write_text(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                         for k, v in figures.items()}))

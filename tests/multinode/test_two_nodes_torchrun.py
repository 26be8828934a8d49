"""A real 2-node torchrun (gloo on CPU) over two sshd "nodes" in their own PID namespaces: gpuwatch shows
one job over both hosts; after the test SIGSTOPs one rank the job is stalled with that rank named; the
py-spy dump marks it; killing the job from gpuwatch ends both ranks on both hosts."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from gpuwatch_tui.actions.audit import AuditLog
from gpuwatch_tui.actions.service import ActionService
from gpuwatch_tui.actions.settings import ActionSettings

from tests.core.helpers import wait_for
from tests.multinode import cluster

STALL_AFTER = 3.0


@pytest.fixture
def nodes(sshd_factory, tmp_path):
    reason = cluster.nodes_unavailable()
    if reason:
        pytest.fail(reason)  # under CI this must not pass by skipping
    nodes = cluster.start_nodes(sshd_factory, tmp_path)
    yield nodes
    cluster.stop_run(nodes)
    cluster.stop_nodes(nodes)


def joined(monitor):
    return [v for v in monitor.tracker.views() if v.multi_node]


def test_one_job_over_two_nodes_names_the_stopped_rank(nodes, ssh_env, tmp_path):
    run_dir = tmp_path / "run"
    cluster.launch(ssh_env, nodes, run_dir)
    ranks = cluster.ranks(nodes)
    monitor = cluster.monitor_for(ssh_env, nodes, STALL_AFTER)

    async def scenario():
        await monitor.start()
        try:
            await wait_for(lambda: joined(monitor) and len(joined(monitor)[0].ranks) == 2
                           and cluster.steps_logged(run_dir, "node-b") >= 2, 40, 0.1, "one job over both nodes")
            views = monitor.tracker.views()
            job = joined(monitor)[0]
            assert len([v for v in views if set(v.hosts or (v.host,)) & {"node-a", "node-b"}]) == 1, views
            assert job.hosts == ("node-a", "node-b") and job.run_key == "slurm job 4242", job
            assert [(r.rank, r.host) for r in job.ranks] == [(0, "node-a"), (1, "node-b")]
            assert {(r.host, r.pid) for r in job.ranks} == {(r.node, r.ns_pid) for r in ranks}
            assert job.phase not in ("stalled", "crashed") and not any(r.culprit for r in job.ranks), job

            victim = next(r for r in ranks if r.node == "node-b")
            os.kill(victim.pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            await wait_for(lambda: (j := joined(monitor)) and j[0].phase == "stalled"
                           and j[0].evidence and j[0].evidence[0].startswith("rank 1 on node-b: process stopped (T)"),
                           30, 0.05, "the stopped rank named")
            named_after = time.monotonic() - stopped_at
            job = joined(monitor)[0]
            assert [r.rank for r in job.ranks if r.culprit] == [1], job.ranks
            assert "rank 0 waiting" in job.evidence[0], job.evidence
            print(f"culprit named {named_after:.2f} s after the stop: {job.evidence[0]}")

            # py-spy dumps every rank on both hosts; analysed together, the stopped rank is the suspect.
            service = ActionService(monitor, ActionSettings(kill_grace_s=1.0, kill_wait_s=2.0),
                                    AuditLog(tmp_path / "state" / "audit.jsonl"), False, "ana")
            plan = service.plan(job.id, "dump_stack")
            assert {p.host for p in plan.parts} == {"node-a", "node-b"}, plan
            dumped = await service.execute(plan)
            report = dumped.report
            assert report is not None and {p.rank for p in report.processes} >= {0, 1}, dumped.summary()
            assert [s.rank for s in report.analysis.suspects] == [1], dumped.summary()
            assert victim.state() == "stopped"  # left as it was found

            # Kill from gpuwatch: every rank and agent on both hosts ends, each through its own host.
            plan = service.plan(job.id, "kill")
            assert {p.host for p in plan.parts} == {"node-a", "node-b"}
            killed = await service.execute(plan)
            assert killed.ok, killed.summary()
            await wait_for(lambda: not any(r.alive() for r in ranks) and not cluster.all_processes(nodes), 10, 0.1,
                           "both ranks gone")
            return named_after
        finally:
            await monitor.stop()

    asyncio.run(scenario())

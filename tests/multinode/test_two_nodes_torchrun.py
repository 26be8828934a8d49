"""A real 2-node torchrun (gloo on CPU) over two sshd "nodes" in their own PID namespaces: gpuwatch shows
one job over both hosts; after the test SIGSTOPs one rank the job is stalled with that rank named; the
py-spy dump marks it; killing the job from gpuwatch ends both ranks on both hosts."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

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
                           and cluster.steps_logged(run_dir, "node-b") >= 3, 40, 0.1, "one job over both nodes")
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
            return named_after
        finally:
            await monitor.stop()

    asyncio.run(scenario())

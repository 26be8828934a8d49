"""The culprit in one key, on a real 2-node torchrun (gloo on CPU, 2 ranks per node, two sshd "nodes"): one rank
wedges outside torch and the other three wait in the all-reduce. One dump over both nodes groups the stacks
(three ranks in all_reduce, the odd rank the suspect), reads every rank's flight recorder (the collective the
wedged rank never entered), and a second dump tells stuck from moving."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gpuwatch_tui.actions import collective_evidence
from gpuwatch_tui.actions.audit import AuditLog
from gpuwatch_tui.actions.service import ActionService
from gpuwatch_tui.actions.settings import ActionSettings

from tests.core.helpers import wait_for
from tests.multinode import cluster

SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_wedge.py"
WEDGED = 3


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


def fr_env(run_dir: Path) -> dict[str, str]:
    return {"TORCH_FR_BUFFER_SIZE": "200", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": str(run_dir / "frpipe_"),
            "TORCH_FR_DUMP_TEMP_FILE": str(run_dir / "frdump_"), "WEDGE_FILE": str(run_dir / "wedge"),
            "WEDGE_RANK": str(WEDGED)}


def test_one_dump_groups_four_ranks_over_two_nodes_and_a_second_tells_stuck(nodes, ssh_env, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cluster.launch(ssh_env, nodes, run_dir, nproc_per_node=2, script=SCRIPT, extra_env=fr_env(run_dir))
    cluster.ranks(nodes, 60, per_node=2, script=SCRIPT)
    monitor = cluster.monitor_for(ssh_env, nodes, 3.0)

    async def scenario():
        await monitor.start()
        try:
            await wait_for(lambda: joined(monitor) and len(joined(monitor)[0].ranks) == 4
                           and cluster.steps_logged(run_dir, "node-b") >= 4, 90, 0.1, "one job of 4 ranks")
            (run_dir / "wedge").write_text("")
            before = cluster.steps_logged(run_dir, "node-a") + cluster.steps_logged(run_dir, "node-b")
            await asyncio.sleep(1.0)
            await wait_for(lambda: _steps(run_dir) == before or _quiet(run_dir, 1.5), 30, 0.2, "the steps stop")
            job = joined(monitor)[0]
            service = ActionService(monitor, ActionSettings(), AuditLog(tmp_path / "state" / "audit.jsonl"), False,
                                    "ana")
            t0 = time.monotonic()
            first = (await service.execute(service.plan(job.id, "dump_stack"))).report
            took = time.monotonic() - t0
            groups = first.analysis.groups
            assert [g.size for g in groups] == [3, 1], [g.text for g in groups]
            assert groups[0].ranks == (0, 1, 2) and groups[0].where.startswith("all_reduce ← <module> (ddp_wedge.py:")
            assert groups[1].ranks == (WEDGED,) and groups[1].suspect
            assert groups[1].where.startswith("next_batch (ddp_wedge.py:")
            fr = collective_evidence.fr_analysis(first.fr_records)
            assert fr is not None and fr.suspects == (WEDGED,) and not fr.failed, fr and fr.summary
            assert fr.stuck[0].op == "gloo:all_reduce" and fr.stuck[0].entered == (0, 1, 2)
            second = (await service.execute(service.plan(job.id, "dump_stack"))).report
            assert [g.motion for g in second.analysis.groups] == ["stuck", "stuck"]
            assert second.motion.startswith("stuck")
            assert any("3 ranks in all_reduce" in line for line in second.findings())
            print(f"grouped verdict of 4 ranks over 2 nodes in {took:.2f} s; {groups[0].text} / {groups[1].text}")
        finally:
            await monitor.stop()

    asyncio.run(scenario())


def _steps(run_dir: Path) -> int:
    return cluster.steps_logged(run_dir, "node-a") + cluster.steps_logged(run_dir, "node-b")


_last: dict = {}


def _quiet(run_dir: Path, seconds: float) -> bool:
    """No new step logged for `seconds`."""
    n = _steps(run_dir)
    now = time.monotonic()
    seen = _last.get(run_dir)
    if seen is None or seen[0] != n:
        _last[run_dir] = (n, now)
        return False
    return now - seen[1] >= seconds

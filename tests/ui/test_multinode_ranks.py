"""A job over two hosts in the dashboard: one row in the jobs table (hosts x GPUs), a rank table in the
job pane with the culprit rank marked."""

from __future__ import annotations

from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
from gpuwatch_tui.ui.widgets.rank_table import RankTable
from gpuwatch_tui.views import JobView, RankView

NOW = 1764500000.0
JOB_ID = "multi:slurm job 4242"


def multi_node_job() -> JobView:
    ranks = tuple(
        RankView(host=host, pid=4100 + i, start_ticks=900 + i, rank=i, local_rank=i % 2, world_size=4,
                 node_rank=i // 2, gpus=(i % 2,), util_pct=0.0 if i == 3 else 100.0,
                 power_w=124.0 if i == 3 else 128.0, power_limit_w=700.0, state="T" if i == 3 else "R",
                 last_log_at=NOW - 95, culprit=i == 3, note="process stopped (T)" if i == 3 else "",
                 job_id=f"{host}:4000:1")
        for i, host in enumerate(("bastion-c", "bastion-c", "lab-d", "lab-d")))
    return JobView(
        id=JOB_ID, name="pretrain.py", host="bastion-c", phase="stalled", detail="rank-stopped", since=NOW - 60,
        confidence=0.9, evidence=("rank 3 on lab-d: process stopped (T); ranks 0-2 waiting (state R)",),
        advice="a stopped rank holds every collective: send it SIGCONT, or kill the job", actions=("kill", "dump_stack"),
        pids=(4000, 4100, 4101), gpus=(0, 1), hosts=("bastion-c", "lab-d"), ranks=ranks,
        parts=("bastion-c:4000:1", "lab-d:4000:1"), run_key="slurm job 4242")


async def test_one_row_over_both_hosts_and_a_rank_table(app, source):
    source._jobs.append(multi_node_job())
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(JobsTable)
        assert table.job_ids.count(JOB_ID) == 1
        assert str(table.get_cell(JOB_ID, "host")) == "bastion-c +1"
        assert str(table.get_cell(JOB_ID, "gpus")) == "2x2"
        app.open_job(JOB_ID)
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, JobScreen)
        ranks = screen.query_one(RankTable)
        assert ranks.display and ranks.row_count == 4
        key = "lab-d:4103:903"
        assert str(ranks.get_cell(key, "state")) == "T stopped" and str(ranks.get_cell(key, "util")) == "0% 124W"
        assert "process stopped (T)" in str(ranks.get_cell(key, "note"))
        assert str(ranks.get_cell("bastion-c:4100:900", "note")) == ""
        assert str(ranks.get_cell(key, "log")) == "1m35s ago"


async def test_a_single_host_job_shows_no_rank_table(app):
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_job("trainer-b:30100")
        await pilot.pause()
        await pilot.pause()
        assert not app.screen.query_one(RankTable).display



def test_multinode_job_pane_snapshot(snap_compare):
    from gpuwatch_tui.ui.app import GpuwatchApp
    from gpuwatch_tui.ui.recorded_source import RecordedSource

    from .conftest import FLEET

    source = RecordedSource(FLEET)
    source._jobs.append(multi_node_job())

    async def open_multi_node_job(pilot):
        pilot.app.open_job(JOB_ID)
        await pilot.pause()

    assert snap_compare(GpuwatchApp(source), terminal_size=(120, 32), run_before=open_multi_node_job)


def test_multinode_jobs_table_snapshot(snap_compare):
    from gpuwatch_tui.ui.app import GpuwatchApp
    from gpuwatch_tui.ui.recorded_source import RecordedSource

    from .conftest import FLEET

    source = RecordedSource(FLEET)
    source._jobs.append(multi_node_job())
    assert snap_compare(GpuwatchApp(source), terminal_size=(120, 32))


def test_gpus_and_pids_on_every_host_belong_to_the_job():
    job = multi_node_job()
    assert ("lab-d", 1) in job.gpu_slots and ("bastion-c", 0) in job.gpu_slots
    assert ("lab-d", 4103) in job.pid_slots


async def test_nccl_ras_verdict_of_the_latest_dump_shows_beside_the_rank(app, source):
    from gpuwatch_tui.actions import nccl_ras
    from gpuwatch_tui.actions.dump import DumpReport
    from gpuwatch_tui.actions.stack_analysis import analyse
    from tests.collectives.ras_replay import captured

    source._jobs.append(multi_node_job())
    ras = nccl_ras.parse_text(captured("ras_two_stopped_verbose_a.txt")).to_json()  # rank 1: not answering
    app.latest_dumps[JOB_ID] = DumpReport("bastion-c,lab-d", "pretrain.py", NOW, "py-spy", "host", [], analyse([]),
                                          ras=ras)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        app.open_job(JOB_ID)
        await pilot.pause()
        await pilot.pause()
        ranks = app.screen.query_one(RankTable)
        assert str(ranks.get_cell("bastion-c:4101:901", "note")) == \
            "NCCL RAS: not answering (no communicator data from it)"
        assert str(ranks.get_cell("bastion-c:4100:900", "note")) == ""
        assert "process stopped (T)" in str(ranks.get_cell("lab-d:4103:903", "note"))

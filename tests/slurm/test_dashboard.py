"""The dashboard with [slurm]: the queue table under the jobs shows running, pending and ended jobs from
a real Slurm, refreshed by the poller (a job that ends moves to its final state); without [slurm] the
table is not there."""

from __future__ import annotations


from gpuwatch_tui.config import load_config
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.widgets.slurm_queue import SlurmQueueTable
from tests.support.pilot import wait_until


def rows(table: SlurmQueueTable) -> dict[str, list[str]]:
    return {str(key.value): [str(c) for c in table.get_row(key)] for key in table.rows}


async def test_queue_table_live(slurm_env, tmp_path):
    c = slurm_env
    failed = c.sbatch("--job-name=crashes", script="exit 3")
    c.wait_state(failed, {"FAILED"})
    running = c.sbatch("--job-name=train", "--time=5", script="sleep 4")
    c.wait_state(running, {"RUNNING"})
    pending = c.sbatch("--job-name=next", "--time=3", script="sleep 60")
    config_file = tmp_path / "hosts.toml"
    config_file.write_text('[settings]\nsample_interval = 0.5\n\n[[hosts]]\nname = "here"\nlocal = true\n\n'
                           '[slurm]\nlogin = "local"\nuser = "root"\npoll_interval = "1s"\nwatch_nodes = false\n')
    try:
        source = MonitorSource(config=load_config(str(config_file)))
        app = GpuwatchApp(source, min_refresh_interval=0)
        async with app.run_test(size=(160, 40)) as pilot:
            table = app.screen.query_one(SlurmQueueTable)
            assert table.display
            await wait_until(pilot, lambda: {running, pending, failed} <= set(rows(table)))
            r = rows(table)
            assert r[running][2] == "RUNNING" and r[running][3] == "gwnode1" and r[running][4].endswith("/5:00")
            assert r[pending][2] == "PENDING" and r[pending][3] == "(Resources)" and r[pending][4] == "0:00/3:00"
            assert r[failed][2] == "FAILED" and r[failed][5] == "3"
            assert r[running][6] == f"{c.jobs_dir}/slurm-{running}.out"
            # The running job ends (its script sleeps 4 s): the next reads show it COMPLETED, exit 0,
            # and the pending one starts.
            await wait_until(pilot, lambda: rows(table).get(running, [""] * 7)[2] == "COMPLETED", 20)
            assert rows(table)[running][5] == "0"
            await wait_until(pilot, lambda: rows(table)[pending][2] == "RUNNING", 20)
            assert table.size.height >= 4
    finally:
        c.run(["scancel", running, pending], check=False)


async def test_no_slurm_no_table(tmp_path):
    config_file = tmp_path / "hosts.toml"
    config_file.write_text('[settings]\nsample_interval = 0.5\n\n[[hosts]]\nname = "here"\nlocal = true\n')
    source = MonitorSource(config=load_config(str(config_file)))
    app = GpuwatchApp(source, min_refresh_interval=0)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(0.2)
        assert not app.screen.query(SlurmQueueTable)  # not even mounted hidden
        assert source.slurm_jobs() == []

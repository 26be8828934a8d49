"""The live adapter over the real core: a config watching this machine, a real scenario job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpuwatch_tui.config import load_config
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.gpu_grid import GpuGrid
from gpuwatch_tui.ui.widgets.host_bar import HostBar
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
from gpuwatch_tui.ui.widgets.log_view import LogView
from tests.support.pilot import wait_until

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "scenarios" / "train_logging.py"


async def test_live_local_host_and_job_log_follows(tmp_path):
    log = tmp_path / "train.log"
    config_file = tmp_path / "hosts.toml"
    config_file.write_text(
        '[settings]\nsample_interval = 0.5\n\n[[hosts]]\nname = "here"\nlocal = true\n\n'
        f'[[jobs]]\nhost = "here"\nname = "demo"\nmatch = "{SCENARIO.name}"\n'
    )
    with open(log, "wb") as out:
        job = subprocess.Popen([sys.executable, str(SCENARIO), "--steps", "400", "--step-time", "0.05"],
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        source = MonitorSource(config=load_config(str(config_file)))
        assert source.monitor is None  # built after the first frame
        app = GpuwatchApp(source, min_refresh_interval=0)
        async with app.run_test(size=(120, 36)) as pilot:
            bar = app.screen.query_one(HostBar)
            grid = app.screen.query_one(GpuGrid)
            # first frame: configured hosts, before any sample (named on the grid, counted on the bar)
            assert "here" in "\n".join(grid.render_line(y).text for y in range(3))
            assert "1 connecting" in bar.render().plain
            await wait_until(pilot, lambda: "1 connected" in bar.render().plain)
            table = app.screen.query_one(JobsTable)
            await wait_until(pilot, lambda: table.row_count >= 1)
            job_id = table.job_ids[0]
            app.open_job(job_id)
            await pilot.pause()
            assert isinstance(app.screen, JobScreen)
            view = app.screen.query_one(LogView)
            await wait_until(pilot, lambda: any("step" in line for line in view.lines))
            first_total = source.job_log_total(job_id)
            await wait_until(pilot, lambda: source.job_log_total(job_id) > first_total + 3)
            await wait_until(pilot, lambda: view._total_shown > first_total)  # the view follows
            await pilot.press("q")
    finally:
        job.kill()
        job.wait()

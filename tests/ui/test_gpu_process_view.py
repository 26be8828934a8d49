"""`g`, the GPU process view, with nvitop's columns: SM %, GPU memory, CPU %, host memory, time, user and
command; it sorts both ways, opens the process's job with enter, and says so when no process holds a GPU."""

from __future__ import annotations

from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.gpu_processes import EMPTY, GpuProcessTable

from .helpers import lines_of


async def test_the_process_view_carries_nvitops_columns(app):
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        table = app.screen.query_one(GpuProcessTable)
        header, *rows = lines_of(table)
        for title in ("SM %", "GPU mem", "CPU %", "Host mem", "Time", "User", "Command"):
            assert title in header
        alone = [r for r in table.rows if r.sm_pct is not None]
        assert alone and all(r.rss_bytes and r.started for r in table.rows)
        assert any(":" in line for line in rows)  # running times, as m:ss or h:mm:ss


async def test_S_reverses_the_sort_and_enter_opens_the_job(app):
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        table = app.screen.query_one(GpuProcessTable)
        mems = [r.mem_mib for r in table.rows]
        await pilot.press("S")
        assert [r.mem_mib for r in table.rows] == sorted(mems)  # smallest first now
        await pilot.press("S")
        assert [r.mem_mib for r in table.rows] == sorted(mems, reverse=True)
        row = table.rows[table.cursor]
        assert row.job_id is not None
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == row.job_id


async def test_g_with_no_gpu_process_says_so(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("slash", *"no-such-host", "enter", "g")
        await pilot.pause()
        table = app.screen.query_one(GpuProcessTable)
        assert table.rows == []
        assert EMPTY in "\n".join(lines_of(table))


async def test_a_shared_gpus_processes_show_their_own_sm_share(tmp_path):
    from gpuwatch_tui.ui.app import GpuwatchApp
    from gpuwatch_tui.ui.recorded_source import RecordedSource

    from .test_snapshots import _shared_fleet

    app = GpuwatchApp(RecordedSource(_shared_fleet(tmp_path / "shared.json")), min_refresh_interval=0)
    async with app.run_test(size=(200, 40)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        table = app.screen.query_one(GpuProcessTable)
        shared = {r.job.split()[-1]: r.sm_pct for r in table.rows if r.host == "trainer-e" and r.gpu == 1}
        # each process its own share (the GPU reads 99 %), not the GPU's utilisation nor "-"; jobs as "id name"
        assert shared == {"sft-nohup": 96.0, "vit-flex": 0.0}, shared

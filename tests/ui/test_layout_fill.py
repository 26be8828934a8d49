"""The dashboard uses the whole terminal: no stretch of blank rows while there is data to show.

Read from the rendered screen (the compositor's lines), at every size the snapshots cover."""

from __future__ import annotations

import json

import pytest

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.recorded_source import RecordedSource
from gpuwatch_tui.ui.screens.dashboard import pane_heights
from gpuwatch_tui.ui.widgets.gpu_processes import GpuProcessTable
from gpuwatch_tui.ui.widgets.history_view import HistoryView

from .conftest import FLEET

SIZES = [(80, 24), (120, 40), (200, 50), (300, 80)]
MAX_BLANK_RUN = 3


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def longest_blank_run(lines: list[str]) -> int:
    longest = run = 0
    for line in lines:
        run = run + 1 if not line.strip() else 0
        longest = max(longest, run)
    return longest


def fleet_without_jobs(tmp_path):
    data = json.loads(FLEET.read_text(encoding="utf-8"))
    data["jobs"] = []
    path = tmp_path / "no-jobs.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("jobs", [True, False], ids=["jobs", "no-jobs"])
async def test_no_run_of_blank_rows(size, jobs, tmp_path):
    app = GpuwatchApp(RecordedSource(FLEET if jobs else fleet_without_jobs(tmp_path)), min_refresh_interval=0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        lines = screen_lines(app)
        assert len(lines) == size[1]
        assert longest_blank_run(lines) <= MAX_BLANK_RUN, "\n".join(lines)
        text = "\n".join(lines)
        assert "NVIDIA H200" in text and "driver 580.159.04" in text  # what nvitop users look for first
        if jobs:
            assert "eval-sweep-3" in text  # every job fits, at every size
        if size[1] >= 40:
            assert app.screen.query_one(HistoryView).size.height >= 5
            assert "▲ now" in text and "last 60 samples" in text  # the sweep chart's head and its reach
            if jobs:  # trainer-a: a chart per GPU, each labelled
                assert "GPU 7 98% · mem 97% · 676 W" in text


async def test_history_follows_the_grid_cursor(tmp_path):
    app = GpuwatchApp(RecordedSource(fleet_without_jobs(tmp_path)), min_refresh_interval=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        history = app.screen.query_one(HistoryView)
        assert history.host == "trainer-a" and history.gpu is None  # the host, all its GPUs
        app.screen.query_one("#gpu-grid").focus()
        await pilot.press("down", "down")
        await pilot.pause()
        assert (history.host, history.gpu) == ("trainer-a", 1)
        assert "trainer-a · GPU 1" in "\n".join(screen_lines(app))


async def test_tab_and_mouse_move_focus_and_the_focused_header_is_marked(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.focused.id == "jobs"
        await pilot.press("tab")
        assert app.focused.id in ("gpu-grid", "jobs") and app.focused.id != "jobs"
        grid = app.screen.query_one("#gpu-grid")
        focused = grid.get_component_rich_style("gpu-grid--header")
        await pilot.click("#jobs", offset=(5, 2))
        assert app.focused.id == "jobs"
        assert grid.get_component_rich_style("gpu-grid--header") != focused


async def test_g_shows_the_gpu_processes_sortable(app):
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        table = app.screen.query_one(GpuProcessTable)
        assert table.display and app.focused is table
        assert len(table.rows) == 12  # one per (GPU, process) in the recording (the crashed job holds none)
        assert all(r.user == "ml" for r in table.rows)
        mems = [r.mem_mib for r in table.rows]
        assert mems == sorted(mems, reverse=True)  # biggest first
        row = next(r for r in table.rows if r.host == "trainer-b" and r.gpu == 0)
        dpo = next(j for j in app.source.jobs() if j.name == "dpo-2rank")
        assert row.job == f"{dpo.short_id} dpo-2rank" and row.job_id == dpo.id and row.command != "?"
        await pilot.press("s")  # the next column: CPU %
        assert table.sort_column == "cpu"
        await pilot.click(GpuProcessTable, offset=(2, 0))  # the Host header
        assert table.sort_column == "host"
        assert [r.host for r in table.rows] == sorted(r.host for r in table.rows)
        await pilot.press("g")
        assert not table.display and app.focused.id == "jobs"


def test_pane_heights_fill_and_keep_room_for_jobs():
    assert pane_heights(40, 20, 6) == (20, 6, 14)  # spare rows go to the history view
    assert pane_heights(30, 20, 6) == (20, 10, 0)  # too few for a chart: the table takes them
    grid, jobs, history = pane_heights(22, 200, 129)  # 128 hosts, 128 jobs
    assert grid + jobs == 22 and jobs >= 4 and history == 0


async def test_a_host_without_gpus_charts_its_cpu_and_ram(tmp_path):
    """The history view of a host with no GPU fills its rows with the host's CPU and RAM over the
    window instead of one line of text over an empty area."""
    data = json.loads(fleet_without_jobs(tmp_path).read_text(encoding="utf-8"))
    host = data["hosts"][0]
    total = host["mem_total_kib"]
    host.update(gpus=[], gpu_source="none",
                host_samples=[{"cpu_pct": 5.0 + i, "mem_avail_kib": total * (60 - i) // 100} for i in range(30)])
    path = tmp_path / "no-gpu.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    app = GpuwatchApp(RecordedSource(path), min_refresh_interval=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.pause()
        history = app.screen.query_one(HistoryView)
        history.select(host["name"], None)
        history.show(app.source.store)
        await pilot.pause()
        lines = [history.render_line(y).text for y in range(history.size.height)]
        text = "\n".join(lines)
        assert history.size.height >= 10
        assert f"{host['name']} · no GPU" in text
        assert "CPU 34% of 192 cores" in text and "load 27.5" in text  # the newest reading
        assert "RAM 69%" in text and "GiB" in text
        assert "▲ now" in text and "last 60 samples" in text
        assert longest_blank_run(lines) <= MAX_BLANK_RUN, text
        assert sum("█" in line or "▆" in line or "▇" in line for line in lines) >= 3, text

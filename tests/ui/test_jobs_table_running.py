"""The jobs table marks the row of a job whose action runs: "killing…", "restarting…", "dumping…",
from the moment it is confirmed until the outcome arrives (the app passes its state; no I/O in the table)."""

from __future__ import annotations

import asyncio

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable

from .actions_fakes import ActingRecordedSource
from .conftest import FLEET
from .helpers import lines_of

DPO = "trainer-b:30100"  # the jobs table's second row: dpo-2rank


def row_of(table: JobsTable, job_id: str) -> str:
    return lines_of(table)[1 + table.job_ids.index(job_id)]


async def test_the_row_says_what_runs_until_the_outcome_arrives():
    source = ActingRecordedSource(FLEET)
    app = GpuwatchApp(source, min_refresh_interval=0)
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.screen.query_one(JobsTable)
        for key, word in (("K", "killing…"), ("u", "restarting…")):
            source.release = asyncio.Event()
            table.cursor = table.job_ids.index(DPO)
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, ConfirmActionScreen)
            await pilot.press("y")
            await pilot.pause()
            assert app.running_actions == {DPO: source.ran[-1].action}
            cell = table.get_cell(DPO, "phase")
            assert cell.plain.startswith(f"{word} "), cell.plain
            assert word in row_of(table, DPO)
            others = [j for j in table.job_ids if j != DPO]
            assert not any(w in str(table.get_cell(j, "phase")) for j in others for w in ("killing", "restarting"))
            source.release.set()
            await app.workers.wait_for_complete([w for w in app.workers if w.group == "actions"])
            await pilot.pause()
            assert app.running_actions == {}
            assert word not in row_of(table, DPO) and word not in table.get_cell(DPO, "phase").plain


async def test_a_narrow_phase_column_keeps_the_running_word():
    source = ActingRecordedSource(FLEET)
    app = GpuwatchApp(source, min_refresh_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        app.running_actions[DPO] = "dump_stack"  # as the app sets it when a dump is confirmed
        app.screen.refresh_from_source()
        await pilot.pause()
        table = app.screen.query_one(JobsTable)
        assert "dumping…" in row_of(table, DPO)

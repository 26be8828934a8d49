"""An ended job (crashed, finished, or no process left) shows no ETA in the jobs table: its last
estimate would read as time still to come."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.ui.widgets.jobs_table import JobsTable

from .helpers import lines_of

TRAINING = "trainer-a:41200"  # training, with an ETA in the recording


async def test_eta_goes_when_the_job_ends(app, source):
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.pause()
        running_eta = table.get_cell(TRAINING, "eta")
        assert running_eta not in ("-", ""), running_eta
        job = next(j for j in source.jobs() if j.id == TRAINING)
        for phase, alive in (("crashed", False), ("finished", False), ("training", False)):
            source.set_job(TRAINING, phase=phase, alive=alive,
                           progress=dataclasses.replace(job.progress, eta_s=1234.0))
            source.advance(1)
            await pilot.pause()
            assert table.get_cell(TRAINING, "eta") == "-", (phase, alive)
            row = lines_of(table)[1 + table.job_ids.index(TRAINING)]
            assert "20:34" not in row, row  # 1234 s as the table would print it
        source.set_job(TRAINING, phase="training", alive=True)
        source.advance(1)
        await pilot.pause()
        assert table.get_cell(TRAINING, "eta") == "20:34"


async def test_a_stalled_job_shows_no_rate_and_no_eta_until_it_moves_again(app, source):
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.pause()
        job = next(j for j in source.jobs() if j.id == TRAINING)
        rate = table.get_cell(TRAINING, "rate")
        assert rate not in ("-", "") and table.get_cell(TRAINING, "eta") not in ("-", "")
        source.set_job(TRAINING, phase="stalled", alive=True,
                       progress=dataclasses.replace(job.progress, eta_s=1234.0))
        source.advance(1)
        await pilot.pause()
        assert (table.get_cell(TRAINING, "rate"), table.get_cell(TRAINING, "eta")) == ("-", "-")
        source.set_job(TRAINING, phase="training", alive=True)
        source.advance(1)
        await pilot.pause()
        assert table.get_cell(TRAINING, "eta") == "20:34" and table.get_cell(TRAINING, "rate") == rate

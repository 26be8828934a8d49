"""The job pane is built once and reused for every job opened after: nothing of the job shown
before may stay (data, log, search, marks, rows, action outcome, focus, keys)."""

from __future__ import annotations

import asyncio

from gpuwatch_tui.ui.palette import Palette
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen
from gpuwatch_tui.ui.screens.dashboard import DashboardScreen
from gpuwatch_tui.ui.screens.job_screen import JobScreen, NewLinesMark
from gpuwatch_tui.ui.widgets.action_outcome import ActionOutcomeTable
from gpuwatch_tui.ui.widgets.log_view import LogView
from gpuwatch_tui.ui.widgets.outdir_line import OutdirLine
from gpuwatch_tui.ui.widgets.process_table import ProcessTable
from gpuwatch_tui.ui.widgets.rank_table import RankTable
from gpuwatch_tui.ui.widgets.verdict_panel import VerdictPanel

from .test_actions_dialog import actions_done, acting_app
from .test_multinode_ranks import JOB_ID as MULTI, multi_node_job
from .helpers import lines_of, static_text

SIZE = (120, 40)
LLAMA = "trainer-a:41200"  # training, a long log, 9 processes, an output directory
DPO = "trainer-b:30100"  # stalled (nccl-spin), two ranks
CRASHED = "trainer-e:28841"  # ended: dismissable


async def open_job(app, pilot, job_id) -> JobScreen:
    app.open_job(job_id)
    await pilot.pause()
    await pilot.pause()
    assert isinstance(app.screen, JobScreen) and app.screen.job_id == job_id
    return app.screen


async def back(pilot) -> None:
    await pilot.press("escape")
    await pilot.pause()
    assert isinstance(pilot.app.screen, DashboardScreen)


def proc_keys(source, job_id) -> set[str]:
    return {f"{p.pid}:{p.start_time}" for p in source.job_procs(job_id)}


def assert_shows(screen: JobScreen, source, job_id: str) -> None:
    """Every part of the pane is this job's."""
    job = next(j for j in source.jobs() if j.id == job_id)
    assert screen.job_id == job_id and screen.selected_job_id == job_id and screen.job.id == job_id
    title = static_text(screen.query_one("#job-title"))
    assert title.startswith(job.label) and (job.log or "") in title  # "ID name" (the name alone without an id)
    assert f" {job.phase.upper()} " in static_text(screen.query_one(VerdictPanel))
    log = screen.query_one(LogView)
    assert log.lines == source.job_log(job_id)
    assert log.follow and log.search_term == "" and log.matches == [] and not log.wrap
    if log.lines:
        assert lines_of(log)[-1].rstrip() == log.lines[-1]
    assert not screen.query_one(NewLinesMark).display
    box = screen.query_one("#log-search")
    assert not box.display and box.value == ""
    procs = screen.query_one(ProcessTable)
    assert {row.value for row in procs.rows} == proc_keys(source, job_id)
    ranks = screen.query_one(RankTable)
    assert ranks.display == bool(job.ranks) and ranks.row_count == len(job.ranks)
    outdir = source.job_outdir(job_id)
    shown = static_text(screen.query_one(OutdirLine))
    assert (outdir.path in shown) if outdir is not None else "no output directory known" in shown
    assert log.has_focus


async def test_open_a_leave_it_paused_and_searched_then_b_shows_only_b(app, source):
    async with app.run_test(size=SIZE) as pilot:
        first = await open_job(app, pilot, LLAMA)
        assert_shows(first, source, LLAMA)
        # Leave A in every state a person can: searched (paused), new lines counted, wrapped, procs focused.
        await pilot.press("slash", *"checkpoint", "enter")
        await pilot.pause()
        log = first.query_one(LogView)
        assert log.matches and not log.follow
        source.append_log(LLAMA, [f"only in A {i}" for i in range(5)])
        await pilot.pause()
        await pilot.pause()
        assert first.query_one(NewLinesMark).display
        await pilot.press("w", "slash")  # wrap on; the search box open again
        assert log.wrap and first.query_one("#log-search").display
        await pilot.press("escape")  # closes the search box
        first.query_one(ProcessTable).focus()
        await pilot.pause()
        await back(pilot)

        second = await open_job(app, pilot, DPO)
        assert second is first  # the same pane, not a newly composed one
        assert_shows(second, source, DPO)
        assert not any("only in A" in line or "checkpoint" in line for line in second.query_one(LogView).lines)
        title = static_text(second.query_one("#job-title"))
        assert "llama" not in title and "dpo-2rank" in title
        assert "nccl-spin" in static_text(second.query_one(VerdictPanel))
        assert not second.check_action("dismiss_job", ())  # B is running: x is not offered

        await back(pilot)
        third = await open_job(app, pilot, CRASHED)
        assert third is first
        assert_shows(third, source, CRASHED)
        assert third.check_action("dismiss_job", ())  # an ended job: x is offered

        await back(pilot)
        again = await open_job(app, pilot, LLAMA)
        assert_shows(again, source, LLAMA)
        assert again.query_one(LogView).lines[-1] == "only in A 4"  # A's own lines come back with A
        assert again.query_one(ProcessTable).row_count == 9


async def test_keys_in_the_reused_pane_act_on_the_job_shown():
    app, source = acting_app()
    source.release = asyncio.Event()
    source.release.set()
    async with app.run_test(size=SIZE) as pilot:
        await open_job(app, pilot, DPO)
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmActionScreen)
        await pilot.press("y")
        await actions_done(app)
        await pilot.pause()
        pane = app.screen
        assert isinstance(pane, JobScreen) and pane.query_one(ActionOutcomeTable).display  # A's outcome
        await back(pilot)

        second = await open_job(app, pilot, "trainer-e:51877")
        assert second is pane
        assert not second.query_one(ActionOutcomeTable).display  # the outcome was the other job's
        assert "30112" not in static_text(second.query_one(ActionOutcomeTable))
        await pilot.press("K")
        await pilot.pause()
        assert source.planned[-1].job_id == "trainer-e:51877"  # the key acts on the job on screen
        await pilot.press("escape")
        await pilot.pause()
        assert [p.job_id for p in source.ran] == [DPO]


async def test_a_theme_changed_while_the_pane_was_closed_reaches_it(app, source):
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_job(app, pilot, LLAMA)
        await back(pilot)
        before = app.theme
        app.theme = next(name for name in app.theme_names if name != before)
        await pilot.pause()
        assert await open_job(app, pilot, DPO) is pane
        expected = Palette(app.theme_variables).style("muted")
        for widget in (pane.query_one(VerdictPanel), pane.query_one(OutdirLine), pane.query_one(LogView)):
            assert widget.palette.style("muted") == expected, widget


async def test_a_job_that_is_gone_shows_nothing_of_the_last_one(app, source):
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_job(app, pilot, LLAMA)
        await back(pilot)
        assert await open_job(app, pilot, "trainer-a:1") is pane
        assert static_text(pane.query_one("#job-title")) == "job trainer-a:1 is gone"
        assert static_text(pane.query_one(VerdictPanel)) == ""
        assert pane.query_one(LogView).lines == []
        assert pane.query_one(ProcessTable).row_count == 0
        assert pane.job is None and not pane.check_action("dismiss_job", ())


async def test_a_job_opened_from_the_reused_pane_gets_a_pane_of_its_own(app, source):
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_job(app, pilot, LLAMA)
        other = await open_job(app, pilot, DPO)  # e.g. from the command palette
        assert other is not pane and pane.job_id == LLAMA
        assert_shows(other, source, DPO)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is pane
        assert_shows(pane, source, LLAMA)


async def test_the_rank_table_of_a_multi_node_job_goes_with_it(app, source):
    source._jobs.append(multi_node_job())
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_job(app, pilot, MULTI)
        assert_shows(pane, source, MULTI)
        assert pane.query_one(RankTable).row_count == 4
        await back(pilot)
        assert await open_job(app, pilot, DPO) is pane
        assert_shows(pane, source, DPO)  # no rank table, no rows left over


async def test_a_pane_left_before_its_first_mount_shows_the_next_job(app, source):
    async with app.run_test(size=SIZE) as pilot:
        app.open_job(LLAMA)
        app.pop_screen()  # enter, escape, enter faster than the first pane mounts
        app.open_job(DPO)
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        assert_shows(app.screen, source, DPO)

"""Pilot tests for the job pane: verdict, history, following log, search, processes, output dir."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.ui.screens.dashboard import DashboardScreen
from gpuwatch_tui.ui.screens.job_screen import JobScreen, NewLinesMark
from gpuwatch_tui.ui.widgets.log_view import LogView
from gpuwatch_tui.ui.widgets.outdir_line import OutdirLine
from gpuwatch_tui.ui.widgets.phase_history import PhaseHistory
from gpuwatch_tui.ui.widgets.process_table import ProcessTable
from gpuwatch_tui.ui.widgets.verdict_panel import VerdictPanel

from .helpers import lines_of, notifications, static_text

SIZE = (120, 40)
LLAMA = "trainer-a:41200"


async def open_job(app, pilot, job_id):
    app.open_job(job_id)
    await pilot.pause()
    await pilot.pause()
    assert isinstance(app.screen, JobScreen)
    return app.screen


async def test_verdict_evidence_advice_and_history(app):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, "trainer-b:30100")
        verdict = static_text(screen.query_one(VerdictPanel))
        assert "STALLED" in verdict and "nccl-spin" in verdict and "7m12s" in verdict
        assert "121 W" in verdict and "d: py-spy dump" in verdict
        history = static_text(screen.query_one(PhaseHistory))
        assert "loading" in history and "training" in history and "stalled 7m12s" in history


async def test_processes_and_output_dir(app):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        procs = screen.query_one(ProcessTable)
        assert procs.row_count == 9
        assert str(procs.get_cell("41210:" + str(1764500000.0 - 8948), "state")) == "R"
        outdir = static_text(screen.query_one(OutdirLine))
        assert "83 files" in outdir and "1.3 TB" in outdir and "20m10s ago" in outdir


async def test_cpu_percent_from_successive_samples(app, source):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, "trainer-e:51877")
        table = screen.query_one(ProcessTable)
        proc = source._procs["trainer-e:51877"][0]
        key = f"{proc.pid}:{proc.start_time}"
        host = source.store.hosts["trainer-e"]
        first = host.last_sample_time
        source._procs["trainer-e:51877"] = [dataclasses.replace(proc, cpu_s=proc.cpu_s + 1.0)]
        source.advance(1.0)
        await pilot.pause()
        # +1 CPU second over the time between the two samples (not between two redraws)
        expected = f"{100.0 / (host.last_sample_time - first):.0f}"
        assert str(table.get_cell(key, "cpu")) == expected
        for _ in range(3):  # redraws without a new sample keep the figure
            app.screen.refresh_from_source()
            await pilot.pause()
            assert str(table.get_cell(key, "cpu")) == expected


async def test_log_follows_new_lines(app, source):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        log = screen.query_one(LogView)
        assert lines_of(log)[-1].startswith("step  41230")
        source.append_log(LLAMA, ["hello from the newest line"])
        await pilot.pause()
        await pilot.pause()
        assert log.follow
        assert lines_of(log)[-1].rstrip() == "hello from the newest line"


async def test_scrolling_up_pauses_and_mark_counts_then_resumes(app, source):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        log = screen.query_one(LogView)
        await pilot.press("pageup")
        await pilot.pause()
        assert not log.follow
        frozen = lines_of(log)
        source.append_log(LLAMA, [f"new {i}" for i in range(7)])
        await pilot.pause()
        await pilot.pause()
        assert lines_of(log) == frozen  # the view does not move while paused
        mark = screen.query_one(NewLinesMark)
        assert mark.display and "+7 new lines" in static_text(mark)
        await pilot.click(NewLinesMark)
        await pilot.pause()
        await pilot.pause()
        assert log.follow and not mark.display
        assert lines_of(log)[-1].rstrip() == "new 6"


async def test_f_and_end_resume_following(app, source):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        log = screen.query_one(LogView)
        await pilot.press("up", "up")
        assert not log.follow
        source.append_log(LLAMA, ["x"])
        await pilot.press("f")
        await pilot.pause()
        await pilot.pause()
        assert log.follow and lines_of(log)[-1].rstrip() == "x"
        await pilot.press("home")
        assert not log.follow
        await pilot.press("end")
        await pilot.pause()
        assert log.follow


async def test_mouse_wheel_up_pauses(app):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        log = screen.query_one(LogView)
        await pilot.mouse_down(LogView)  # move the pointer over the log
        log.post_message(__import__("textual.events", fromlist=["MouseScrollUp"]).MouseScrollUp(
            log, 5, 5, 0, 0, 0, False, False, False))
        await pilot.pause()
        await pilot.pause()
        assert not log.follow


async def test_search_highlights_and_n_moves(app):
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        log = screen.query_one(LogView)
        await pilot.press("slash", *"checkpoint", "enter")
        await pilot.pause()
        assert len(log.matches) == 4 and not log.follow
        assert notifications(app)[-1] == "4 matches for 'checkpoint'"
        newest = log.matches[log.match_index]
        assert "checkpoint" in log.lines[newest]
        assert any("checkpoint" in line for line in lines_of(log))
        await pilot.press("n")
        assert log.match_index == 0
        await pilot.press("N")
        assert log.lines[log.matches[log.match_index]] == log.lines[newest]


async def test_esc_closes_search_then_goes_back(app):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        await pilot.press("slash")
        assert screen.query_one("#log-search").display
        await pilot.press("escape")
        assert not screen.query_one("#log-search").display
        assert isinstance(app.screen, JobScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_empty_log_and_missing_outdir(app):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, "trainer-e:51877")
        assert screen.query_one(LogView).lines == []
        screen = app.screen
        app.pop_screen()
        screen = await open_job(app, pilot, "trainer-e:52001")
        assert "does not exist" in static_text(screen.query_one(OutdirLine))


async def test_job_pane_keys_work_there_too(app, source):
    async with app.run_test(size=SIZE) as pilot:
        await open_job(app, pilot, "trainer-e:51877")
        await pilot.press("u")
        assert notifications(app)[-1].startswith("restart with -u")  # the key reaches the action from the pane
        await pilot.press("p")
        assert source.paused
        await pilot.press("question_mark")
        await pilot.press("escape")
        assert isinstance(app.screen, JobScreen)


async def test_a_flood_of_lines_stays_bounded(app, source):
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        for chunk in range(20):
            source.append_log(LLAMA, [f"flood {chunk} {i}" for i in range(5000)])
        await pilot.pause()
        await pilot.pause()
        log = screen.query_one(LogView)
        assert len(log.lines) <= 10_000
        assert lines_of(log)[-1].rstrip() == "flood 19 4999"


async def test_long_commands_are_cut_to_the_width_not_scrolled(source):
    from gpuwatch_tui.ui.app import GpuwatchApp

    app = GpuwatchApp(source, min_refresh_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_job(app, pilot, LLAMA)
        await pilot.pause()
        procs = screen.query_one(ProcessTable)
        assert not procs.show_horizontal_scrollbar
        assert procs.virtual_size.width <= procs.scrollable_content_region.width
        key = f"41210:{1764500000.0 - 8948}"
        shown = str(procs.get_cell(key, "cmd"))
        whole = procs.full_command(key)
        assert shown.endswith("…") and whole.startswith(shown[:-1]) and whole.endswith("(+4 children)")
        # hovering a row shows the whole command line
        procs.hover_coordinate = procs.hover_coordinate.__class__(procs.get_row_index(key), 6)
        await pilot.pause()
        assert str(procs.tooltip) == whole
        # wider: the whole command fits again
        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        await pilot.pause()
        assert str(procs.get_cell(key, "cmd")) == whole

"""Pilot tests for every dashboard binding, the palette, mouse and live updates."""

from __future__ import annotations

from textual.command import CommandPalette

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.screens.dashboard import DashboardScreen, empty_note
from gpuwatch_tui.ui.screens.help_screen import HelpScreen, binding_rows
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.gpu_grid import GpuGrid
from gpuwatch_tui.ui.widgets.host_bar import HostBar
from gpuwatch_tui.ui.widgets.jobs_table import COLUMNS, JobsTable

from .helpers import lines_of, notifications

SIZE = (120, 40)


def job_ids(app) -> list[str]:
    table = app.screen.query_one(JobsTable)
    return table.job_ids


async def test_first_frame_shows_hosts_gpus_and_jobs(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(HostBar).render().plain
        # The bar sums up (states counted, GPUs, power); the grid's host headers name each host.
        assert "5 hosts" in bar and "1 unreachable" in bar and "1 host key unknown" in bar
        assert "13 GPUs" in bar and "kW" in bar and "trainer-a" not in bar
        grid = "\n".join(lines_of(app.screen.query_one(GpuGrid)))
        assert "trainer-a" in grid and "llama-8b-pretrain" in grid and "690W" in grid
        assert "timed out" in grid  # bastion-c's error text
        assert "SHA256:" in grid  # lab-d's fingerprint hint
        assert job_ids(app) == ["trainer-a:41200", "trainer-b:30100", "trainer-e:52001",
                                "trainer-e:51877", "trainer-e:28841"]


async def test_help_lists_every_binding(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        described = {what for _, _, what in binding_rows(app)}
        for expected in ("Quit", "Help", "Filter", "Open", "Back", "Pause", "Theme", "Kill",
                         "Restart with -u", "py-spy dump", "Command palette", "Sort", "Search log", "Follow"):
            assert expected in described
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_q_quits_and_stops_the_source(app, source):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert source._stopped.is_set()


async def test_ctrl_c_quits_and_stops_the_source(app, source):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0
    assert source._stopped.is_set()


async def test_j_and_k_move_as_the_arrows_do_and_capital_k_kills(app):
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.press("j", "j")
        assert table.cursor == 2
        await pilot.press("k")
        assert table.cursor == 1
        assert notifications(app) == []  # k moved; it did not ask to kill
        await pilot.press("K")
        assert notifications(app)[-1].startswith("kill")  # the recorded fleet cannot act: it says so


async def test_ctrl_z_shows_problems_only_and_back(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+z")
        await pilot.pause()
        assert job_ids(app) == ["trainer-b:30100", "trainer-e:51877", "trainer-e:28841"]  # stalled, silent, crashed
        grid = "\n".join(lines_of(app.screen.query_one(GpuGrid)))
        assert "trainer-a" not in grid  # healthy, every GPU claimed by its job
        assert "bastion-c" in grid and "lab-d" in grid and "trainer-b" in grid
        assert "PROBLEMS ONLY" in app.screen.query_one(HostBar).render().plain
        await pilot.press("ctrl+z")
        await pilot.pause()
        assert len(job_ids(app)) == 5 and "trainer-a" in "\n".join(lines_of(app.screen.query_one(GpuGrid)))
        assert "PROBLEMS ONLY" not in app.screen.query_one(HostBar).render().plain


async def test_slash_filters_jobs_and_grid_and_esc_clears(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash")
        await pilot.press(*"trainer-b")
        await pilot.pause()
        assert job_ids(app) == ["trainer-b:30100"]
        grid = "\n".join(lines_of(app.screen.query_one(GpuGrid)))
        assert "trainer-b" in grid and "trainer-a" not in grid
        await pilot.press("enter")  # keeps the filter, back to the table
        assert isinstance(app.focused, JobsTable)
        assert job_ids(app) == ["trainer-b:30100"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(job_ids(app)) == 5


async def test_a_table_with_every_job_filtered_out_says_why_and_which_key_brings_them_back(app):
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.press("slash")
        await pilot.press(*"nosuchjob")
        await pilot.pause()
        assert job_ids(app) == []
        assert lines_of(table)[1].strip() == "no job matches “nosuchjob” (5 jobs hidden; esc: clear the filter)"
        await pilot.press("enter", "escape")
        await pilot.pause()
        assert len(job_ids(app)) == 5 and "hidden" not in "\n".join(lines_of(table))


def test_the_empty_note_names_what_problems_only_keeps():
    assert empty_note(0, True, "") == "no training job found on the hosts shown"
    assert empty_note(0, False, "", reached=False) == "no host reached yet: see the host lines"
    assert empty_note(9, True, "") == "nothing stalled, crashed or silent, no leftovers (9 jobs hidden; ctrl+z: all)"
    assert empty_note(1, True, "x").endswith("match “x” (1 job hidden; ctrl+z: all)")


async def test_filter_by_phase(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"stalled")
        await pilot.pause()
        assert job_ids(app) == ["trainer-b:30100"]


async def test_enter_opens_job_and_esc_goes_back(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == "trainer-b:30100"
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_p_pauses_display_but_not_the_source(app, source):
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.press("p")
        assert source.paused
        assert "PAUSED" in app.screen.query_one(HostBar).render().plain
        before = table.get_cell("trainer-e:28841", "since")
        source.advance(60)
        await pilot.pause()
        assert table.get_cell("trainer-e:28841", "since") == before
        await pilot.press("p")
        await pilot.pause()
        assert not source.paused
        assert table.get_cell("trainer-e:28841", "since") == "1m25s"


async def test_t_cycles_themes(app):
    async with app.run_test(size=SIZE) as pilot:
        seen = [app.theme]
        for _ in range(3):
            await pilot.press("t")
            seen.append(app.theme)
        assert seen == ["gpuwatch-dark", "gpuwatch-high-contrast", "gpuwatch-light", "gpuwatch-dark"]


async def test_action_keys_reach_the_action_on_the_selected_job(app):
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("down")
        for key, name in (("K", "kill"), ("u", "restart with -u"), ("d", "py-spy dump")):
            await pilot.press(key)
            # the recorded fleet cannot act on hosts: each key says so (the flow: test_actions_dialog.py)
            assert notifications(app)[-1].startswith(name)


async def test_action_keys_in_readonly_mode(source):
    # --readonly removes kill / restart / dump (the registry's unsafe actions): the keys do nothing.
    app = GpuwatchApp(source, readonly=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("down", "K", "u", "d")
        await pilot.pause()
        assert notifications(app) == []
        assert not {"K", "u", "d"} & set(app.active_bindings)


async def test_command_palette_opens_a_job(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"open job sft")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == "trainer-e:51877"


async def test_the_palette_lists_quit_and_theme_once(app):
    async with app.run_test(size=SIZE) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Quit" not in titles and "Theme" not in titles and "Keys" not in titles  # gpuwatch's own instead
        assert "Screenshot" in titles  # Textual's others stay
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"quit")
        await pilot.pause(0.5)
        from textual.command import CommandList

        options = app.screen.query_one(CommandList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert sum("Quit" in p for p in prompts) == 1, prompts


async def test_s_cycles_sort_and_header_click_sorts(app):
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.press("s")  # host
        assert table.sort_column == "host"
        await pilot.press("s", "s", "s", "s")  # id, job, gpus, phase
        assert table.sort_column == "phase"
        assert job_ids(app)[:3] == ["trainer-e:28841", "trainer-b:30100", "trainer-e:51877"]
        await pilot.click(JobsTable, offset=(4, 0))  # the "Host" header
        await pilot.pause()
        assert table.sort_column == "host"
        await pilot.click(JobsTable, offset=(4, 0))
        await pilot.pause()
        assert table.sort_reverse and job_ids(app)[-1] == "trainer-a:41200"


async def test_mouse_double_click_on_a_gpu_opens_its_job(app):
    async with app.run_test(size=SIZE) as pilot:
        grid = app.screen.query_one(GpuGrid)
        row = next(i for i, r in enumerate(grid._rows) if r.kind == "gpus" and r.host == "trainer-b")
        await pilot.click(GpuGrid, offset=(10, row + grid.HEADER_LINES), times=2)  # under the column names
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == "trainer-b:30100"


async def test_grid_keyboard_cursor_opens_job(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("shift+tab")
        assert isinstance(app.focused, GpuGrid)
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == "trainer-a:41200"


async def test_updates_change_cells_in_place(app, source):
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        order = table.job_ids
        source.set_job("trainer-e:52001", phase="training", detail=None)
        source.advance(1)
        await pilot.pause()
        assert table.get_cell("trainer-e:52001", "phase").plain == "training"
        assert table.job_ids == order  # same rows, same places
        row = order.index("trainer-e:52001")
        assert "training" in table.render_line(row + 1).text


async def test_unchanged_rows_are_not_rerendered(app, source):
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await pilot.pause()
        before = dict(table._strips)
        table.show(source.jobs(), source.now(), force=True)  # same data again
        await pilot.pause()
        for y in range(1, table.row_count + 1):
            table.render_line(y)
        assert all(table._strips[k][1] is before[k][1] for k in before)


async def test_jobs_table_fits_80_columns_without_scrolling(source):
    app = GpuwatchApp(source, min_refresh_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(JobsTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width
        assert table.max_scroll_x == 0
        keys = table.layout_keys
        # the short id stays at every width (a verb takes it); Since goes before it would
        assert {"host", "id", "job", "phase", "progress", "eta"} <= set(keys)
        header = table.render_line(0).text
        assert "Host" in header and "ETA" in header
        for y in range(table.row_count + 1):
            line = table.render_line(y).text
            assert len(line.rstrip()) <= table.scrollable_content_region.width
        # wide terminals get every column back
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert table.layout_keys == tuple(k for k, _ in COLUMNS)


async def test_source_changes_coalesce(app, source):
    async with app.run_test(size=SIZE) as pilot:
        calls = []
        screen = app.screen
        original = screen.refresh_from_source
        screen.refresh_from_source = lambda: calls.append(1) or original()
        for _ in range(200):
            source.notify()  # 200 changes before the UI gets a turn
        await pilot.pause()
        assert 1 <= len(calls) < 20


async def test_host_bar_is_one_summary_line_at_80_columns(source):
    app = GpuwatchApp(source, min_refresh_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = app.screen.query_one(HostBar).render().plain.splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("5 hosts: ● 3 connected, ✗ 1 unreachable")
        grid = "\n".join(lines_of(app.screen.query_one(GpuGrid)))
        # Its error does not fit the header at 80 columns: whole, on the line under it.
        assert "bastion-c" in grid and "connect to 10.0.4.17:22: timed out after 10 s (retry in 30 s)" in grid
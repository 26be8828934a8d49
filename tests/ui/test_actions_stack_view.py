"""The stack view over a real 2-rank NCCL hang dumped by py-spy on an H200: suspect first, differing
frames marked, the analysis on top, where the dump was saved, escape closes."""

from __future__ import annotations

from textual.widgets import TabbedContent, TabPane

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.recorded_source import RecordedSource
from gpuwatch_tui.ui.screens.dashboard import DashboardScreen
from gpuwatch_tui.ui.screens.stack_view import ProcessStacks, StackViewScreen, process_label

from .conftest import FLEET
from .helpers import static_text
from .stack_fixtures import nccl_hang_report

SIZE = (120, 40)


async def open_stacks(pilot, report) -> StackViewScreen:
    pilot.app.push_screen(StackViewScreen(report))
    await pilot.pause()
    assert isinstance(pilot.app.screen, StackViewScreen)
    return pilot.app.screen


async def test_suspect_tab_first_and_marked_then_ranks_then_the_launcher():
    app = GpuwatchApp(RecordedSource(FLEET), min_refresh_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_stacks(pilot, nccl_hang_report())
        panes = list(screen.query(TabPane))
        assert [p.id for p in panes] == ["pid-1085", "pid-1084", "pid-1037"]
        tabs = screen.query_one(TabbedContent)
        labels = [str(tabs.get_tab(p).label) for p in panes]
        assert labels[0] == "suspect · rank 1 · pid 1085 · idle in <module>"
        assert labels[1] == "rank 0 · pid 1084 · active in _fused_adam"
        assert labels[2] == "pid 1037 · launcher"
        assert tabs.active == "pid-1085"  # the suspect is what opens
        assert tabs.get_tab(panes[0]).has_class("-suspect") and not tabs.get_tab(panes[1]).has_class("-suspect")
        summary = static_text(screen.query_one("#stack-summary"))
        assert summary.startswith("suspect: rank 1 (pid 1085)")
        assert "Collective hang" in summary and "_fused_adam" in summary
        assert "/var/lib/gpuwatch/dumps/trainer-b_dpo-2rank.json" in static_text(screen.query_one("#stack-saved"))


async def test_frames_that_differ_between_ranks_are_marked():
    app = GpuwatchApp(RecordedSource(FLEET), min_refresh_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_stacks(pilot, nccl_hang_report())
        by_pid = {w.process.pid: static_text(w) for w in screen.query(ProcessStacks)}
        assert "* <module> (nccl_hang.py:57)" in by_pid[1085]  # the suspect, outside torch
        assert "* _fused_adam (adam.py:880)" in by_pid[1084]  # the waiting rank, inside the op that syncs
        assert "Thread 1084 MainThread (active)" in by_pid[1084]
        # other threads are listed but not diffed: no '*' in them
        sections = by_pid[1084].split("\nThread ")
        assert len(sections) == 4 and sections[1].startswith("1084 MainThread")
        other = "".join(sections[2:])
        assert "\n* " not in other
        assert "\n* " not in by_pid[1037]  # the launcher is left out of the rank diff


async def test_right_moves_to_the_next_rank_and_escape_closes():
    app = GpuwatchApp(RecordedSource(FLEET), min_refresh_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_stacks(pilot, nccl_hang_report(saved_to=None))
        assert "not saved" in static_text(screen.query_one("#stack-saved"))
        await pilot.press("right")
        assert screen.query_one(TabbedContent).active == "pid-1084"
        await pilot.press("left", "left")
        assert screen.query_one(TabbedContent).active == "pid-1037"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


def test_label_of_a_process_without_a_rank_or_dump():
    from gpuwatch_tui.actions.stacks import ProcessDump
    from gpuwatch_tui.actions.stack_analysis import classify_process

    gone = ProcessDump(pid=77, start_ticks=1, ok=False, error_code="permission", message="ptrace: not permitted")
    assert process_label(gone, classify_process(gone), suspect=False) == "pid 77 · no dump"

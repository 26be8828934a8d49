"""k / u / d in the dashboard: plan, confirm dialog, a worker runs the action, the outcome is shown.

These drive the dialog flow over the recorded fleet with a source that plans from its recorded
processes (tests/ui/actions_fakes.py); the run over a live host is in test_actions_live.py.
"""

from __future__ import annotations

import asyncio

from textual.widgets import Button

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.screens.stack_view import StackViewScreen
from gpuwatch_tui.ui.widgets.action_outcome import ActionOutcomeTable

from .actions_fakes import ActingRecordedSource
from .conftest import FLEET
from .helpers import notifications, static_text
from .stack_fixtures import nccl_hang_report

SIZE = (120, 40)
DPO = "trainer-b:30100"  # dpo-2rank: two ranks, pids 30112 and 30113
CRASHED = "trainer-e:28841"


def acting_app(readonly: bool = False) -> tuple[GpuwatchApp, ActingRecordedSource]:
    source = ActingRecordedSource(FLEET)
    return GpuwatchApp(source, readonly=readonly, min_refresh_interval=0), source


async def actions_done(app) -> None:
    """Wait for the action workers (not the source's, which runs until the app stops)."""
    workers = [w for w in app.workers if w.group == "actions"]
    if workers:  # an empty list would mean "every worker"
        await app.workers.wait_for_complete(workers)


def dialog_text(screen: ConfirmActionScreen) -> str:
    parts = [static_text(w) for w in screen.query("Static") if not isinstance(w, Button)]
    return "\n".join(parts)


async def test_k_on_the_selected_job_opens_the_dialog_with_host_job_pids_users_and_command():
    app, source = acting_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "K")  # the jobs table's second row: dpo-2rank
        await pilot.pause()
        assert isinstance(app.screen, ConfirmActionScreen)
        text = dialog_text(app.screen)
        assert "Kill?" in text and "dpo-2rank on trainer-b" in text
        assert "host trainer-b" in text and f"({DPO})" in text
        for pid in ("30112", "30113"):
            assert pid in text
        assert "ml" in text and "main" in text  # user and role of each target
        assert "python3 -u dpo.py --rank 0" in text  # its command line
        assert "SIGTERM pids 30112 30113" in text and "SIGKILL after 10s" in text  # the exact command
        assert app.screen.query_one("#confirm-cancel", Button).has_focus  # safe default
        rows = list(app.screen.query(".confirm-target"))
        assert [str(r.tooltip) for r in rows][0] == "python3 -u dpo.py --rank 0"  # the whole command on hover
        assert source.ran == []  # nothing happens before confirming


async def test_escape_and_n_cancel_and_nothing_runs():
    app, source = acting_app()
    async with app.run_test(size=SIZE) as pilot:
        for key in ("escape", "n", "enter"):  # enter presses the focused button: Cancel
            await pilot.press("down", "K")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmActionScreen)
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmActionScreen), key
        await pilot.pause(0.2)
        assert source.ran == [] and app.running_actions == {}
        assert len(source.planned) == 3


async def test_y_runs_in_a_worker_the_pane_says_killing_then_shows_each_process_outcome():
    app, source = acting_app()
    source.release = asyncio.Event()
    async with app.run_test(size=SIZE) as pilot:
        app.open_job(DPO)
        await pilot.pause()
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmActionScreen)
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        assert [p.action for p in source.ran] == ["kill"]
        assert app.running_actions == {DPO: "kill"}
        assert "killing…" in static_text(app.screen.query_one("#job-title"))
        await pilot.press("K")  # a second kill of the same job while the first runs: refused
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmActionScreen)
        assert "busy (killing…)" in notifications(app)[-1]
        source.release.set()
        await actions_done(app)
        await pilot.pause()
        assert app.running_actions == {}
        assert "killing…" not in static_text(app.screen.query_one("#job-title"))
        assert "kill dpo-2rank on trainer-b: 1 exited, 1 permission-denied" in notifications(app)[-1]
        table = app.screen.query_one(ActionOutcomeTable)
        assert table.display
        shown = static_text(table)
        assert "30112" in shown and "exited after SIGTERM in 0.3 s" in shown
        assert "30113" in shown and "permission denied: Operation not permitted" in shown


async def test_refused_for_an_ended_job_is_a_toast_and_no_dialog():
    app, source = acting_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        app.open_job(CRASHED)
        await pilot.pause()
        await pilot.press("u")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        assert notifications(app)[-1] == "restart with -u refused: eval-sweep-3 has ended (crashed): nothing to restart"
        assert source.ran == []


async def test_readonly_has_no_action_keys_and_plans_nothing():
    app, source = acting_app(readonly=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        app.open_job(DPO)
        await pilot.pause()
        for key in ("K", "u", "d"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, JobScreen)
        assert source.planned == [] and source.ran == [] and notifications(app) == []


async def test_a_source_that_cannot_act_says_so():
    from gpuwatch_tui.ui.recorded_source import RecordedSource

    app = GpuwatchApp(RecordedSource(FLEET), min_refresh_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "d")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmActionScreen)
        toast = notifications(app)[-1]
        # before the service: the source has no plan_action; with it: the recording refuses, saying why
        assert toast.startswith("py-spy dump") and ("cannot act on hosts" in toast or "no host to act on" in toast)


async def test_d_confirmed_opens_the_stack_view_and_s_in_the_pane_reopens_it():
    app, source = acting_app()
    source.next_dump = nccl_hang_report()
    async with app.run_test(size=SIZE) as pilot:
        app.open_job(DPO)
        await pilot.pause()
        assert "s" not in app.active_bindings  # no dump yet: nothing to show
        await pilot.press("d")
        await pilot.pause()
        assert "py-spy dump --json" in dialog_text(app.screen)
        assert "environment captured 3 h ago" in dialog_text(app.screen)  # warnings are shown
        await pilot.press("y")
        await actions_done(app)
        await pilot.pause()
        assert isinstance(app.screen, StackViewScreen)
        toast = notifications(app)[-1]
        assert toast.startswith("py-spy dump of dpo-2rank") and "suspect rank 1 (pid 1085)" in toast
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        line = static_text(app.screen.query_one("#stacks-line"))
        assert "suspect rank 1 (pid 1085)" in line and "s: show" in line
        assert "s" in app.active_bindings
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, StackViewScreen)

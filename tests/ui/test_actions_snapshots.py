"""How the confirm dialog and the stack view look, at 80x24 and 120x40 (and the dialog in the
light and high-contrast themes, whose warning and error colours differ most)."""

from __future__ import annotations

import pytest

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.screens.stack_view import StackViewScreen

from .actions_fakes import ActingRecordedSource
from .conftest import FLEET
from .stack_fixtures import nccl_hang_report

@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """The stack view shows the dump's local time: make it the same on every machine."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


@pytest.mark.parametrize("size", SIZES)
def test_confirm_kill_dialog(snap_compare, size):
    # down, k: kill dpo-2rank (two ranks) from the jobs table
    assert snap_compare(GpuwatchApp(ActingRecordedSource(FLEET)), terminal_size=size, press=["down", "K"])


@pytest.mark.parametrize("theme", ["gpuwatch-light", "gpuwatch-high-contrast"])
def test_confirm_restart_dialog_themes(snap_compare, theme):
    # u on sft-nohup (the buffered job, fifth row): a restart plan with a warning
    app = GpuwatchApp(ActingRecordedSource(FLEET), theme=theme)
    assert snap_compare(app, terminal_size=(120, 40), press=["down", "down", "down", "u"])


@pytest.mark.parametrize("size", SIZES)
def test_stack_view(snap_compare, size):
    async def show(pilot):
        pilot.app.push_screen(StackViewScreen(nccl_hang_report()))
        await pilot.pause()

    assert snap_compare(GpuwatchApp(ActingRecordedSource(FLEET)), terminal_size=size, run_before=show)

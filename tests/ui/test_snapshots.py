"""How the dashboard looks, fed from the recorded fleet (clock frozen in the recording)."""

from __future__ import annotations

import pytest

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.recorded_source import RecordedSource

from .conftest import FLEET

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 50), id="200x50")]
THEMES = ["gpuwatch-dark", "gpuwatch-light"]


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare, size, theme):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET), theme=theme), terminal_size=size)


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES)
def test_job_pane(snap_compare, size, theme):
    async def open_stalled_job(pilot):
        pilot.app.open_job("trainer-b:30100")
        await pilot.pause()

    app = GpuwatchApp(RecordedSource(FLEET), theme=theme)
    assert snap_compare(app, terminal_size=size, run_before=open_stalled_job)


def test_high_contrast_main_screen(snap_compare):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET), theme="gpuwatch-high-contrast"),
                        terminal_size=(120, 32))


def test_help_screen(snap_compare):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET)), terminal_size=(100, 50), press=["question_mark"])


def test_job_pane_long_commands_80x24(snap_compare):
    """torchrun's long command lines are cut with "…", no horizontal scrollbar."""
    async def open_training_job(pilot):
        pilot.app.open_job("trainer-a:41200")
        await pilot.pause()

    assert snap_compare(GpuwatchApp(RecordedSource(FLEET)), terminal_size=(80, 24), run_before=open_training_job)

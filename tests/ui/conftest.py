"""Shared fixtures for the UI tests: a recorded fleet with a frozen clock."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:  # the package may not be installed in the venv
    sys.path.insert(0, str(SRC))

from gpuwatch_tui.ui.app import GpuwatchApp  # noqa: E402
from gpuwatch_tui.ui.recorded_source import RecordedSource  # noqa: E402

DATA = Path(__file__).parent / "data"
FLEET = DATA / "fleet.json"


@pytest.fixture
def source() -> RecordedSource:
    return RecordedSource(FLEET)


@pytest.fixture
def app(source) -> GpuwatchApp:
    # No redraw throttle in tests: a change shows on the next pause, deterministically.
    return GpuwatchApp(source, min_refresh_interval=0)

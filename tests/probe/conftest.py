"""Fixtures shared by the probe's tests."""

from __future__ import annotations

import pytest

from gpuwatch_tui.probe.bundle import probe_source


@pytest.fixture
def probe_ns():
    """The probe's code loaded as it runs on a host (its own globals, no bundle modules)."""
    ns = {"__name__": "probe_under_test", "BUNDLE": {"modules": {}, "options": {}}}
    exec(compile(probe_source(), "agent.py", "exec"), ns)
    return ns

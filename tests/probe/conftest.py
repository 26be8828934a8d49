"""Fixtures shared by the probe's tests."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from gpuwatch_tui.probe.bundle import probe_source


@pytest.fixture
def probe_ns():
    """The probe's code loaded as it runs on a host (its own globals, no bundle modules)."""
    ns = {"__name__": "probe_under_test", "BUNDLE": {"modules": {}, "options": {}}}
    exec(compile(probe_source(), "agent.py", "exec"), ns)
    return ns


@pytest.fixture
def spawn():
    """start(code, *python_args, **popen_kw): a Python process of the test's, killed at its end with
    every process it started."""
    started: list[subprocess.Popen] = []

    def start(code: str, *args: str, **kw) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, *args, "-c", code], **kw)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is not None:
            continue
        try:  # its descendants too (a test's parent starts children): found before it dies and they are orphaned
            below = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            below = []
        proc.kill()
        proc.wait()
        for p in below:
            try:
                p.kill()
                p.wait(5)
            except psutil.Error:
                pass

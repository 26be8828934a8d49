"""Fixtures shared by the probe's tests."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from gpuwatch_tui.transport.probe_bundle import LoadedProbe


@pytest.fixture
def probe_loaded():
    """The probe loaded as a host loads it (agent.py's code with the shipped modules in its bundle, found by
    plain name through its own finder), taken out of this process again at the test's end."""
    probe = LoadedProbe()
    yield probe
    probe.close()


@pytest.fixture
def probe_ns(probe_loaded):
    """agent.py's globals, as loaded by probe_loaded."""
    return probe_loaded.ns


@pytest.fixture
def probe_mod(probe_loaded):
    """probe_mod(name): a shipped module of the probe loaded by probe_loaded (its own copy: a test may set
    its globals)."""
    return probe_loaded.module



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

"""A configured `match` that is too broad, judged from what the real probe matched among real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from gpuwatch_tui.jobs.match_check import match_warning
from gpuwatch_tui.jobs.settings import JobSpec
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
from gpuwatch_tui.feeds.probe_frames import parse_sample



@pytest.fixture
def spawn():
    started: list[subprocess.Popen] = []

    def start(marker: str, own_session: bool, with_child: bool = False) -> subprocess.Popen:
        code = "import sys, time\ntime.sleep(60)\n"
        if with_child:
            code = ("import subprocess, sys, time\n"
                    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', sys.argv[1]])\n"
                    "time.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-c", code, marker], start_new_session=own_session)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        for child in _children(proc.pid):
            try:
                os.kill(child, signal.SIGKILL)  # the worker we started, by pid
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _matched(regex: str):
    """Run the real probe's scan with one match spec; return the matched ProcInfos."""
    loaded = LoadedProbe()
    try:
        probe = loaded.ns["Probe"]({"interval": 1})
        probe.set_wants({"op": "want", "pids": [], "tails": {}, "dirs": {}, "matches": {"cfg0": {"regex": regex}}})
        probe.walk.scan(time.time())
        sample = parse_sample(json.loads(json.dumps(probe.sample())))
    finally:
        loaded.close()
    return [sample.procs[p] for p in sample.matches.get("cfg0", []) if p in sample.procs]


def _settle(procs, count):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and sum(len(_children(p.pid)) for p in procs) < count:
        time.sleep(0.05)
    time.sleep(0.2)


def test_one_tree_in_one_session_is_fine(spawn):
    marker = f"gpuwatch-match-{uuid.uuid4().hex}"
    parent = spawn(marker, own_session=True, with_child=True)
    _settle([parent], 1)
    matched = _matched(marker)
    assert {p.pid for p in matched} == {parent.pid, *_children(parent.pid)}  # launcher + its worker
    assert match_warning(JobSpec("j", "h", match=marker), matched) is None


def test_trees_of_different_sessions_are_warned_with_what_was_matched(spawn):
    marker = f"gpuwatch-match-{uuid.uuid4().hex}"
    a = spawn(marker, own_session=True)
    b = spawn(marker, own_session=True)
    time.sleep(0.3)
    warning = match_warning(JobSpec("j", "h", match=marker), _matched(marker))
    assert warning is not None
    assert warning.startswith(f"match '{marker}' is too broad: it matches 2 process trees in 2 sessions: ")
    assert f"{a.pid} (" in warning and f"{b.pid} (" in warning


def test_a_regex_that_takes_pid_1_is_warned():
    warning = match_warning(JobSpec("j", "h", match="."), _matched("."))
    assert warning is not None and "it matches pid 1: 1 (" in warning
    assert warning.count(";") <= 4  # at most a few listed, then "+N more"


def test_a_pid_file_spec_is_never_judged_broad():
    assert match_warning(JobSpec("j", "h", pid_file="/run/x.pid"), _matched(".")) is None

"""Shared parts of the job-boundary tests: real drivers started as people start them, the real probe on this
machine feeding a real tracker (ProbeLoop), and kill plans taken by the probe's real kill op."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuwatch_tui.actions.job_tree import JobTree
from gpuwatch_tui.actions.kill import KillReport, kill_job
from gpuwatch_tui.jobs.job_actions import KILL
from gpuwatch_tui.jobs.tracker import JobTracker

from tests.actions.conftest import local_request

from .probe_loop import ProbeLoop

DRIVERS = Path(__file__).resolve().parent / "drivers"
TRAIN = DRIVERS / "train_standin.py"
PY = sys.executable  # the interpreter torch is installed for
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def clean_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    env.update(extra)
    return env


class Started:
    """Processes a test started, pinned by psutil (pid + start time); at the end each one is killed by pid,
    then the descendants it had (killed first, a multiprocessing Pool would start new workers)."""

    def __init__(self) -> None:
        self.procs: list[psutil.Process] = []

    def track(self, pid: int) -> psutil.Process:
        p = psutil.Process(pid)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            try:
                if not p.is_running():
                    continue
                kids = p.children(recursive=True)
                p.kill()
            except psutil.Error:
                continue
            for kid in kids:
                try:
                    kid.kill()
                except psutil.Error:
                    pass
        for p in self.procs:
            try:
                p.wait(5)
            except (psutil.Error, psutil.TimeoutExpired, ChildProcessError):
                pass


def wait_file(path: Path, timeout: float = 60.0, lines: int = 1) -> list[str]:
    """The words of a file the driver writes (pids), once it holds at least `lines` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            words = path.read_text().split()
            if len(words) >= lines:
                return words
        time.sleep(0.05)
    raise AssertionError(f"{path.name}: not written within {timeout:g} s")


def job_rooted_at(tracker: JobTracker, pid: int):
    """The live job whose top process is `pid`, or None."""
    return next((v for v in tracker.views() if v.alive and v.root is not None and v.root.pid == pid), None)


def jobs_holding(tracker: JobTracker, pid: int) -> list:
    return [v for v in tracker.views() if pid in v.pids]


def wait_jobs(loop: ProbeLoop, roots: list[int], timeout: float = 90.0) -> dict:
    """Step the probe until each pid in `roots` tops a job of its own; {pid: its view}."""
    ok = loop.run_until(lambda: all(job_rooted_at(loop.tracker, p) is not None for p in roots), timeout)
    views = [(v.id, v.name, v.root, v.pids) for v in loop.tracker.views()]
    assert ok, f"not every run became a job of its own within {timeout:g} s: {views}"
    return {p: job_rooted_at(loop.tracker, p) for p in roots}


def kill(loop: ProbeLoop, view) -> tuple[JobTree, KillReport]:
    """The job's kill plan as the monitor would make it (its processes as last seen), noted on the job as the
    action service does (the run then ends as killed, not as a guess from its log), carried out by the probe's
    kill op."""
    tree = JobTree(loop.host, view.name, tuple(loop.tracker.procs(view.id)))
    loop.tracker.record_action(view.id, KILL, "tester", time.time())
    report = asyncio.run(kill_job(local_request, tree, grace_s=2.0, kill_wait_s=2.0))
    return tree, report


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def gone_within(p: psutil.Process, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(p):
            return True
        time.sleep(0.05)
    return False


def note(driver: str, loop: ProbeLoop, signalled: set[int] | None = None) -> None:
    """One line per driver: the jobs found (name, top pid, pids) and what a kill signalled (seen with -s)."""
    jobs = sorted((v.name, v.root.pid if v.root else None, v.pids) for v in loop.tracker.views())
    print(f"\n[{driver}] jobs: {jobs}; kill signalled: {sorted(signalled) if signalled is not None else '-'}")

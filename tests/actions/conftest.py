"""Fixtures for the action tests: the probe's op modules imported as the host imports them, a `request`
adapter that runs their handlers on a worker thread (as the probe's dispatcher does), and real process
trees that the tests start and stop by pid."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui" / "probe"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
# The host's interpreter: a plain system python3 that another user can run too.
HOST_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

if str(PROBE_DIR) not in sys.path:
    sys.path.insert(0, str(PROBE_DIR))  # on a host, the op modules import ops_base by its plain name

import ops_base  # noqa: E402
import ops_signal  # noqa: E402
import ops_spawn  # noqa: E402

HANDLERS = {**ops_signal.OPS, **ops_spawn.OPS}


class LocalRequestError(Exception):
    """What the core's RequestError carries: a code and words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def local_request(op: str, args: dict, timeout: float) -> dict:
    """Run the op's handler on its own thread, like the probe's dispatcher; OpError becomes a request error."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(HANDLERS[op], args), timeout)
    except ops_base.OpError as exc:
        raise LocalRequestError(exc.code, exc.message) from None
    except asyncio.TimeoutError:
        raise LocalRequestError("timeout", f"{op}: no reply within {timeout:g} s") from None


def ticks(pid: int) -> int:
    value = ops_base.start_ticks(pid)
    assert value is not None, f"process {pid} is gone"
    return value


def alive(pid: int, start: int) -> bool:
    """Still that process, and not a zombie."""
    try:
        ops_base.check_ref(pid, start)
        return True
    except ops_base.OpError:
        return False


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Started:
    """Processes a test started (and what they started), stopped at teardown by (pid, start ticks)."""

    def __init__(self) -> None:
        self.popens: list[subprocess.Popen] = []
        self.refs: list[tuple[int, int]] = []

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        p = subprocess.Popen(*args, **kwargs)
        self.popens.append(p)
        self.track(p.pid)
        return p

    def track(self, pid: int) -> None:
        t = ops_base.start_ticks(pid)
        if t is not None:
            self.refs.append((pid, t))

    def stop_all(self) -> None:
        for pid, t in self.refs:
            if alive(pid, t):
                os.kill(pid, signal.SIGKILL)
        for p in self.popens:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def started():
    s = Started()
    yield s
    s.stop_all()


@pytest.fixture
def request_op():
    return local_request


def proc_info(pid: int):
    """The monitor's view of a live process (the fields actions read), built from /proc like the probe's."""
    import psutil

    from gpuwatch_tui.model import ChildProc, ProcInfo

    p = psutil.Process(pid)
    children = tuple(
        ChildProc(pid=c.pid, name=c.name(), cmdline=tuple(c.cmdline()), state="", start_ticks=ticks(c.pid))
        for c in p.children(recursive=True))
    return ProcInfo(pid=pid, ppid=p.ppid(), start_time=p.create_time(), name=p.name(), cmdline=tuple(p.cmdline()),
                    cwd=p.cwd(), state="S", cpu_s=0.0, cpu_children_s=0.0, rss_bytes=0, threads=1, sid=os.getsid(pid),
                    pgid=os.getpgid(pid), children=children, stdout=None, stderr=None, unbuffered=False,
                    unbuffered_reason="", is_python=True, start_ticks=ticks(pid))

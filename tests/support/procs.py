"""Process helpers: every signal goes to an explicit pid we found ourselves.

Nothing here matches processes by name across the machine (no pkill); the only
machine-wide scan is `processes_with_env`, which looks for an exact
NAME=value marker that only our test sshd sessions carry.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class ProcRef:
    """A pid pinned to its start time, so a reused pid is never mistaken for ours."""

    pid: int
    create_time: float
    name: str = ""
    cmdline: str = ""

    @classmethod
    def of(cls, proc: psutil.Process) -> "ProcRef | None":
        try:
            with proc.oneshot():
                ct = proc.create_time()
                name = proc.name()
            try:
                cmd = " ".join(proc.cmdline())
            except (psutil.Error, OSError):
                cmd = ""
            return cls(proc.pid, ct, name, cmd)
        except (psutil.Error, OSError):
            return None

    def process(self) -> psutil.Process | None:
        """The live (non-zombie) process, or None if it is gone."""
        try:
            p = psutil.Process(self.pid)
            if abs(p.create_time() - self.create_time) > 0.01:
                return None
            if p.status() == psutil.STATUS_ZOMBIE:
                return None
            return p
        except (psutil.Error, OSError):
            return None

    def alive(self) -> bool:
        return self.process() is not None

    def signal(self, sig: int) -> bool:
        p = self.process()
        if p is None:
            return False
        try:
            p.send_signal(sig)
            return True
        except (psutil.Error, OSError):
            return False

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.cmdline or self.name})"


def refs(procs) -> list[ProcRef]:
    out = []
    for p in procs:
        r = p if isinstance(p, ProcRef) else ProcRef.of(p)
        if r is not None:
            out.append(r)
    return out


def descendants(pid: int) -> list[psutil.Process]:
    """All live descendants of *pid* (empty if pid is gone)."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except (psutil.Error, OSError):
        return []
    out = []
    for k in kids:
        try:
            if k.status() != psutil.STATUS_ZOMBIE:
                out.append(k)
        except (psutil.Error, OSError):
            pass
    return out


def is_stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except (psutil.Error, OSError):
        return True  # gone counts as "not running"


def wait_until(pred, timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def stop_and_wait(pid: int, timeout: float = 2.0) -> None:
    """SIGSTOP *pid* and wait until the kernel reports it stopped."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    wait_until(lambda: is_stopped(pid), timeout)


def wait_gone(procs, timeout: float) -> list[ProcRef]:
    """Wait until none of *procs* is alive; return those still alive."""
    rs = refs(procs)
    wait_until(lambda: not any(r.alive() for r in rs), timeout, 0.02)
    return [r for r in rs if r.alive()]


def terminate(procs, timeout: float = 3.0) -> list[ProcRef]:
    """SIGCONT+SIGTERM each, wait, then SIGKILL stragglers. Returns the refs that needed SIGKILL."""
    rs = refs(procs)
    for r in rs:
        r.signal(signal.SIGCONT)
        r.signal(signal.SIGTERM)
    left = wait_gone(rs, timeout)
    for r in left:
        r.signal(signal.SIGKILL)
    wait_gone(left, 2.0)
    return left


def processes_with_env(name: str, value: str) -> list[psutil.Process]:
    """Live processes whose initial environment contains exactly NAME=value."""
    needle = f"{name}={value}".encode()
    out = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            data = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle not in data:
            continue
        if needle in data.split(b"\0"):
            try:
                p = psutil.Process(int(entry.name))
                if p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except (psutil.Error, OSError):
                pass
    return out

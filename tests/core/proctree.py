"""A real three-generation process tree (parent -> child -> grandchild) for request tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

# The parent starts a child that starts a grandchild; each prints its pid, all then sleep.
_TREE = r"""
import os, subprocess, sys, time
depth = int(sys.argv[1])
print(os.getpid(), flush=True)
if depth > 0:
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2]],
                             stdout=sys.stdout)
time.sleep(120)
"""


def start_ticks(pid: int) -> int:
    """Field 22 of /proc/PID/stat: the start time in clock ticks since boot."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    return int(raw[raw.rfind(b")") + 2:].split()[19])


class ProcTree:
    """Started in __init__; `pids` is [parent, child, grandchild]. stop() ends them by pid."""

    def __init__(self, depth: int = 2) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _TREE, str(depth), _TREE],
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.pids = [int(self.proc.stdout.readline()) for _ in range(depth + 1)]
        time.sleep(0.05)

    def ticks(self) -> list[int]:
        return [start_ticks(p) for p in self.pids]

    def stop(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(5)
        # The child and grandchild are reparented when their parents die; they are reaped there.

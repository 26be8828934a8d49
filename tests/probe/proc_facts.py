"""Facts about the tests' own processes, read from /proc, for the probe's tree tests."""

from __future__ import annotations

import time


def children(frame, parent):
    """The children a probe frame lists under the watched process `parent`, by pid."""
    return {c["pid"]: c for p in frame["procs"] if p["pid"] == parent for c in p["children"]}


def stat_of(pid):
    """(state, utime + stime) from /proc/PID/stat."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()
    return fields[0], int(fields[11]) + int(fields[12])


def settle(pids, timeout=10.0):
    """Until each is asleep with no CPU spent over 0.1 s (a Python past its start-up, waiting for a signal)."""
    deadline = time.time() + timeout
    while True:
        before = [stat_of(p) for p in pids]
        time.sleep(0.1)
        if all(b[0] == "S" for b in before) and [stat_of(p) for p in pids] == before:
            return
        assert time.time() < deadline, "the test's processes settle"

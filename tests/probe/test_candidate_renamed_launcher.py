"""A rank whose stdout is a pipe (srun collects every task's output) is a job candidate because a launcher
started it; torchrun's agent starts as "python" and names itself pt_elastic afterwards, so the comm the probe
recorded when it first saw the agent is stale: the parent's comm is read again when the rank is judged.
Real processes: a parent that renames itself after its start, and its child writing to a pipe."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil


PARENT = """
import subprocess, sys, time
open('/proc/self/comm', 'w').write('pt_elastic')
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], stdout=subprocess.PIPE)
print(child.pid, flush=True)
time.sleep(30)
"""


def test_a_child_of_a_renamed_launcher_with_stdout_to_a_pipe_is_a_candidate(probe_mod):
    JobCandidates = probe_mod("candidates").JobCandidates
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        p = psutil.Process(parent.pid)
        deadline = time.monotonic() + 5
        while p.name() != "pt_elastic" and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = {parent.pid: (1, p.create_time(), "python3")}  # as first seen: before it renamed itself
        assert JobCandidates().judge(child, parent.pid, seen, [None, 0, False, None, None]) == "launcher"
        # A parent that is no launcher makes nothing of a child writing to a pipe.
        me = psutil.Process()
        seen = {me.pid: (1, me.create_time(), "python3")}
        state = [None, 0, False, None, None]
        assert JobCandidates().judge(child, me.pid, seen, state) is None and state[2] is True
    finally:
        for proc in psutil.Process(parent.pid).children():
            proc.kill()
        parent.kill()
        parent.wait(5)

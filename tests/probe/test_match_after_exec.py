"""A restart's wrapper forks the job and the child execs it: a /proc walk that lands between the fork and the exec
sees the wrapper's name and command line under the job's pid. Those facts must not stay cached for that pid: once
it has exec'd, a configured job's cmdline match finds it at the next walk (not only at the next full walk, minutes
later). Real processes: one that takes the wrapper's name, then execs a command line with the marker."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

# Named as the wrapper, then exec'd into a command line with the marker (built here, so not in this one's argv).
PRE_EXEC = """
import os, sys
open('/proc/self/comm', 'w').write('gpuwatch-run')
print('named', flush=True)
sys.stdin.readline()
os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', 'MATCH' + 'ME_%d' % os.getpid()])
"""


def test_a_process_seen_before_its_exec_is_matched_once_it_has_execd(probe_ns, probe_mod):
    assert probe_mod("tree_walk").RESTART_WRAPPER == probe_mod("ops_spawn").WRAPPER_NAME
    child = subprocess.Popen([sys.executable, "-c", PRE_EXEC], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "named"
        probe = probe_ns["Probe"]({"interval": 1})
        probe.set_wants({"pids": [], "matches": {"job": {"regex": f"MATCHME_{child.pid}", "pid_file": None}}})
        walk = probe.walk
        walk.scan(time.time(), full=True)
        assert child.pid not in walk.match_pids["job"]  # the wrapper's command line: not the job yet
        child.stdin.write("go\n")
        child.stdin.flush()
        deadline = time.monotonic() + 10
        while f"MATCHME_{child.pid}" not in " ".join(psutil.Process(child.pid).cmdline()):
            assert time.monotonic() < deadline, "the child execs"
            time.sleep(0.02)
        walk.scan(time.time(), full=False)  # a walk between full ones (a pid was handed out)
        assert child.pid in walk.match_pids["job"]
        walk.scan(time.time(), full=True)
        assert child.pid in walk.match_pids["job"]
    finally:
        child.kill()
        child.wait(5)

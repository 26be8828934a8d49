"""A watched process's idle children are read every IDLE_CHILD_READ_S, not every sample, and at once when a
process starts or is reaped on the host: real processes, real /proc. What each test pins down is what the
engine would miss if the trade went wrong: a child that exits, one that turns busy, one that appears."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .proc_facts import children, settle, stat_of

# A parent that starts one child (`sleep`, or Python code) and, on SIGUSR1, kills and reaps it.
PARENT = ("import signal, subprocess, sys\n"
          "p = subprocess.Popen(%r)\n"
          "print(p.pid, flush=True)\n"
          "def stop(*_):\n"
          "    p.kill(); p.wait(); print('reaped', flush=True)\n"
          "signal.signal(signal.SIGUSR1, stop)\n"
          "while True: signal.pause()\n")


def watching(probe_ns, pid):
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = {pid}
    stat_reads = []
    read = probe.files.read
    probe.files.read = lambda path, owner=None: stat_reads.append(path) or read(path, owner)
    return probe, stat_reads


def quiet(probe):
    """As on a host where no process starts or ends: loadavg's tasks total and last pid stay."""
    probe.walk.tasks.changed = lambda loadavg: False


def wait_until(cond, what, timeout=10.0):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.02)


def test_an_idle_child_is_not_read_every_sample_and_is_gone_the_sample_after_it_is_reaped(probe_ns, spawn, probe_mod):
    parent = spawn(PARENT % (["sleep", "60"],), stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    settle([child])
    probe, stat_reads = watching(probe_ns, parent.pid)
    quiet(probe)
    path = "/proc/%d/stat" % child
    for _ in range(2):  # asleep with the same CPU at two reads: idle
        assert child in children(probe.sample(), parent.pid)
    assert stat_reads.count(path) == 2
    frame = probe.sample()
    assert stat_reads.count(path) == 2  # idle, nothing started or reaped: its last read stands ...
    assert children(frame, parent.pid)[child]["state"] == "S"  # ... and its entry repeats it
    del probe.walk.tasks.changed  # the real loadavg from here: a reaped child moves its tasks total
    # (A busy test host hands out pids all the time; the tasks total alone must count as a move.)
    mark, loadavg = probe_mod("procfs").PidCursor(tasks=True), open("/proc/loadavg", "rb").read()
    fields = loadavg.split()
    running, total = fields[3].split(b"/")
    reaped = b" ".join(fields[:3] + [running + b"/%d" % (int(total) - 1), fields[4]]) + b"\n"
    mark.changed(loadavg)
    assert not mark.changed(loadavg) and mark.changed(reaped)  # same last pid, one task fewer: moved
    parent.send_signal(signal.SIGUSR1)
    assert parent.stdout.readline().strip() == "reaped"
    assert children(probe.sample(), parent.pid) == {}  # gone at the next sample, as before


def test_an_idle_child_that_turns_busy_is_seen_within_the_idle_read_interval(probe_ns, probe_loaded, spawn):
    every = 1.0  # the interval's role, in a test of seconds
    probe_loaded.set_global("IDLE_CHILD_READ_S", every)  # (read by the tree walk and the lean path)
    busy = ("import signal\n"
            "signal.signal(signal.SIGUSR1, lambda *_: None)\n"
            "signal.pause()\n"
            "while True: sum(range(10000))\n")
    parent = spawn(PARENT % ([sys.executable, "-c", busy],), stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    settle([child])
    probe, stat_reads = watching(probe_ns, parent.pid)
    quiet(probe)
    cpu = [children(probe.sample(), parent.pid)[child]["cpu_s"] for _ in range(2)]
    assert cpu[0] == cpu[1]
    idle_since = time.time()
    os.kill(child, signal.SIGUSR1)  # spins from now on
    time.sleep(0.3)
    assert children(probe.sample(), parent.pid)[child]["cpu_s"] == cpu[1]  # up to IDLE_CHILD_READ_S late
    while children(probe.sample(), parent.pid)[child]["cpu_s"] == cpu[1]:
        assert time.time() - idle_since < every + 0.5, "a busy child must be read within IDLE_CHILD_READ_S"
        time.sleep(0.1)


def test_a_new_child_of_an_idle_child_is_seen_at_the_next_sample(probe_ns, spawn):
    """The walk goes on below an idle child whose own stat is not read: a process it starts is in the next
    frame (the pid it took moves loadavg's mark: the tree is walked and its children list read)."""
    middle = ("import signal, subprocess\n"
              "def start(*_): print(subprocess.Popen(['sleep', '60']).pid, flush=True)\n"
              "signal.signal(signal.SIGUSR1, start)\n"
              "while True: signal.pause()\n")
    parent = spawn("import subprocess, sys, time\n"
                   "p = subprocess.Popen([sys.executable, '-c', %r])\n"
                   "print(p.pid, flush=True)\n"
                   "p.wait()\n" % middle, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    settle([child])
    probe, stat_reads = watching(probe_ns, parent.pid)
    quiet(probe)
    for _ in range(3):
        probe.sample()
    reads = stat_reads.count("/proc/%d/stat" % child)
    assert reads == 2  # the third sample did not read the idle child
    del probe.walk.tasks.changed  # the real loadavg from here: the new process moves its last pid
    probe.walk.tasks.changed(None)
    os.kill(child, signal.SIGUSR1)
    grandchild = int(parent.stdout.readline())  # the child writes to the parent's stdout, which it shares
    try:
        frame = probe.sample()
        assert grandchild in children(frame, parent.pid)
        assert children(frame, parent.pid)[grandchild]["name"] == "sleep"
    finally:
        for pid in (grandchild, child):  # started for this test, below the one the fixture stops
            os.kill(pid, signal.SIGKILL)


def test_a_watched_process_below_another_is_read_every_sample_in_both_places(probe_ns, spawn):
    """A rank below its launcher is watched itself: its state is fresh in the launcher's children too."""
    parent = spawn(PARENT % (["sleep", "60"],), stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    settle([child])
    probe, _ = watching(probe_ns, parent.pid)
    probe.wants.pids = {parent.pid, child}
    quiet(probe)
    for _ in range(3):
        probe.sample()
    os.kill(child, signal.SIGSTOP)
    try:
        wait_until(lambda: stat_of(child)[0] == "T", "the child stops")
        frame = probe.sample()
        assert children(frame, parent.pid)[child]["state"] == "T"
        assert [p["state"] for p in frame["procs"] if p["pid"] == child] == ["T"]
    finally:
        os.kill(child, signal.SIGCONT)

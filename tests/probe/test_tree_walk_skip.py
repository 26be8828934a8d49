"""A watched process's descendants are walked again only when loadavg's mark (tasks total, last pid) moved
since the last walk (TREE_WALK_AT_LEAST_S): real processes, real /proc, the real mark (a shared test host
moves it every second; each case below moves it itself). What each test pins down is what a wrong skip would
show: a new child missing, an orphan under its dead parent's root, a child adopted by a subreaper missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .proc_facts import children, settle, stat_of

# Prints "NAME PID" for each process started (they share its stdout), so the test knows them all.
# CHILD: starts a `sleep` grandchild and waits for a signal (SIGTERM ends it); MIDDLE: starts CHILD, reaps it.
CHILD = ("import signal, subprocess\n"
         "g = subprocess.Popen(['sleep', '60'])\n"
         "print('G', g.pid, flush=True)\n"
         "signal.pause()\n")
MIDDLE = ("import subprocess, sys, time\n"
          "c = subprocess.Popen([sys.executable, '-c', %r])\n"
          "print('C', c.pid, flush=True)\n"
          "c.wait()\n"
          "print('reaped', flush=True)\n"
          "time.sleep(60)\n" % CHILD)
# A child subreaper (PR_SET_CHILD_SUBREAPER): an orphan below it is its child, not init's.
SUBREAPER = ("import ctypes, signal, subprocess, sys\n"
             "assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0\n"
             "r = subprocess.Popen([sys.executable, '-c', %r])\n"
             "print('R', r.pid, flush=True)\n"
             "while True: signal.pause()\n" % MIDDLE)
# Starts a `sleep` on SIGUSR1.
STARTER = ("import signal, subprocess\n"
           "def start(*_): print('N', subprocess.Popen(['sleep', '60']).pid, flush=True)\n"
           "signal.signal(signal.SIGUSR1, start)\n"
           "print('ready', flush=True)\n"
           "while True: signal.pause()\n")


def read_names(proc, names):
    out = {}
    while not set(names) <= set(out):
        line = proc.stdout.readline().split()
        assert line, "the test's processes stopped early"
        if len(line) == 2:
            out[line[0]] = int(line[1])
    return out


def end(proc, pids):
    """Kill the test's processes below `proc` and `proc` itself, which this test reaps (the fixture's wait
    for orphans is slow where init reaps late)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.kill()
    proc.wait()


def watching(probe_ns, pids):
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = set(pids)
    # Another user's Python job on this shared machine (a torch test, say) is no process of the test's: judged
    # a job candidate, it would be watched and read too.
    probe.candidates.consider = lambda pid, now: None
    return probe


def test_a_child_started_between_two_samples_is_seen_at_the_next_one(probe_ns, spawn):
    parent = spawn(STARTER, stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().strip() == "ready"
    probe = watching(probe_ns, [parent.pid])
    for _ in range(3):
        assert children(probe.sample(), parent.pid) == {}
    os.kill(parent.pid, signal.SIGUSR1)
    new = read_names(parent, ["N"])["N"]
    try:
        assert children(probe.sample(), parent.pid)[new]["name"] == "sleep"
    finally:
        end(parent, [new])


def test_the_tree_is_not_walked_while_the_mark_stands(probe_ns, spawn):
    parent = spawn(STARTER, stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().strip() == "ready"
    os.kill(parent.pid, signal.SIGUSR1)
    child = read_names(parent, ["N"])["N"]
    try:
        settle([parent.pid, child])
        probe = watching(probe_ns, [parent.pid])
        probe.walk.tasks.changed = lambda loadavg: False  # as on a host where no process starts or ends
        reads = []
        read = probe.files.read
        probe.files.read = lambda path, owner=None: reads.append(path) or read(path, owner)
        for _ in range(3):  # walked (the first), then the child is idle after two reads
            assert list(children(probe.sample(), parent.pid)) == [child]
        del reads[:]
        frame = probe.sample()
        assert list(children(frame, parent.pid)) == [child]
        assert reads == ["/proc/%d/stat" % parent.pid]  # no children list, no idle child's stat: the root's own
        # the walk's descriptors stay open for the reads to come: the children file, the idle child's stat
        assert {path for path, _ in probe.files.fds} == {"/proc/%d/stat" % pid for pid in (parent.pid, child)} | {
            "/proc/%d/task/%d/children" % (pid, pid) for pid in (parent.pid, child)}
    finally:
        end(parent, [child])


def test_an_exited_child_is_gone_and_its_orphan_leaves_the_tree(probe_ns, spawn):
    middle = spawn(MIDDLE, stdout=subprocess.PIPE, text=True)
    pids = read_names(middle, ["C", "G"])
    try:
        settle([pids["C"], pids["G"]])
        probe = watching(probe_ns, [middle.pid])
        for _ in range(3):
            assert set(children(probe.sample(), middle.pid)) == {pids["C"], pids["G"]}
        os.kill(pids["C"], signal.SIGTERM)
        assert middle.stdout.readline().strip() == "reaped"
        assert stat_of(pids["G"])[0] == "S"  # alive, now init's (or a subreaper's above the test)
        assert children(probe.sample(), middle.pid) == {}
    finally:
        end(middle, pids.values())


def test_an_orphan_adopted_by_a_watched_subreaper_is_under_it_with_its_new_parent(probe_ns, spawn):
    top = spawn(SUBREAPER, stdout=subprocess.PIPE, text=True)
    pids = read_names(top, ["R", "C", "G"])
    try:
        settle([pids["R"], pids["C"], pids["G"]])
        probe = watching(probe_ns, [top.pid, pids["R"]])
        for _ in range(3):
            frame = probe.sample()
            assert set(children(frame, top.pid)) == {pids["R"], pids["C"], pids["G"]}
            assert set(children(frame, pids["R"])) == {pids["C"], pids["G"]}
        os.kill(pids["C"], signal.SIGTERM)
        assert top.stdout.readline().strip() == "reaped"  # by R: the tasks total falls
        frame = probe.sample()
        assert set(children(frame, pids["R"])) == set()
        below_top = children(frame, top.pid)
        assert set(below_top) == {pids["R"], pids["G"]}
        assert below_top[pids["G"]]["ppid"] == top.pid
    finally:
        end(top, pids.values())

"""The lean steady sample (LeanPath.sample) writes the frame the full path writes: two probes over the same
real processes, one allowed the lean path and one not, sampled back to back on one clock, frame after frame
while logs grow, CPU moves, a process is stopped, a child starts, a child exits unreaped, a log is truncated,
a process changes its working directory and a watched process ends; with and without /proc scan ticks. The host's loadavg is a copy the test moves as the kernel would (a process started
or reaped): the shared test machine's own mark moves every second, where the lean path never runs."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import time
import types

import pytest

# Burns CPU 10 ms in every 20.
BURN = ("import time\n"
        "while True:\n"
        "    t = time.time() + 0.01\n"
        "    while time.time() < t: pass\n"
        "    time.sleep(0.01)\n")
# Writes a line to its (appended) stdout every 10 ms and burns CPU between; so does its child.
BUSY = ("import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', %r])\n"
        "print('C', c.pid, flush=True)\n"
        "while True:\n"
        "    t = time.time() + 0.01\n"
        "    while time.time() < t: pass\n"
        "    print('step', time.time(), flush=True)\n" % BURN)
# Starts a `sleep` on SIGUSR1 (and never reaps it: one that exits stays a zombie below it); moves to the
# directory named by MOVE_TO on SIGUSR2.
STARTER = ("import os, signal, subprocess\n"
           "def start(*_): print('N', subprocess.Popen(['sleep', '120']).pid, flush=True)\n"
           "def move(*_): os.chdir(os.environ['MOVE_TO']); print('moved', flush=True)\n"
           "signal.signal(signal.SIGUSR1, start)\n"
           "signal.signal(signal.SIGUSR2, move)\n"
           "print('ready', flush=True)\n"
           "while True: signal.pause()\n")
IDLE = "import time; time.sleep(120)"
# Host-wide readings each probe takes for itself (its own CPU, the host's CPU and memory): not the same reads.
OWN_READINGS = ("t", "probe_cpu_s", "cpu_pct", "mem_total_kib", "mem_avail_kib")


def count_lean(probe):
    """[how many samples took the lean path], kept up by a wrapper around the probe's LeanPath.sample."""
    taken = [0]
    sample = probe.lean.sample

    def counted(*args):
        frame = sample(*args)
        taken[0] += frame is not None
        return frame

    probe.lean.sample = counted
    return taken


class Clock(object):
    """The probes' time module: one clock for both, so each due time falls on the same sample. It starts past
    CANDIDATE_YOUNG_S: the test's Python jobs are judged for good, not asked again every second while young."""

    now = 0.0  # set by the test
    sleep = staticmethod(time.sleep)

    @classmethod
    def time(cls):
        return cls.now


def wire(frame, ours):
    """The frame as written (key order kept), the test's processes only, without each probe's own readings."""
    kept = {}
    for key, value in frame.items():
        if key in OWN_READINGS:
            continue
        if key == "procs":
            value = [p for p in value if p["pid"] in ours]
        elif key == "candidates":
            value = {pid: why for pid, why in value.items() if int(pid) in ours}
        kept[key] = value
    return json.dumps(kept, separators=(",", ":"))


def state(pid):
    return open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1][0]


def first_line(proc, tag):
    while True:
        line = proc.stdout.readline().split()
        assert line, "the test's process stopped early"
        if line[0] == tag:
            return int(line[1]) if len(line) > 1 else None


@pytest.mark.parametrize("scan_interval", [3600, 4])
def test_the_lean_sample_writes_the_full_paths_frame(probe_ns, probe_loaded, probe_mod, spawn, tmp_path, scan_interval):
    loadavg = tmp_path / "loadavg"
    real = open("/proc/loadavg", "rb").read().split()
    total, last_pid = int(real[3].split(b"/")[1]), int(real[4])

    def move_mark(tasks, pid=None):  # as the kernel does: a pid handed out (`pid`, the last), or a task reaped
        nonlocal total, last_pid
        total += tasks
        last_pid = max(last_pid, pid) if pid is not None else last_pid
        loadavg.write_bytes(b"0.50 0.40 0.30 1/%d %d\n" % (total, last_pid))

    move_mark(0)
    log = tmp_path / "busy.log"
    with open(log, "a") as append:
        busy = spawn(BUSY, stdout=append, stderr=subprocess.STDOUT, start_new_session=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    starter = spawn(STARTER, stdout=subprocess.PIPE, text=True, env=dict(os.environ, MOVE_TO=str(elsewhere)))
    assert first_line(starter, "ready") is None
    idle = spawn(IDLE)
    deadline = time.time() + 10
    while b"C " not in log.read_bytes():
        assert time.time() < deadline, "the busy job starts"
        time.sleep(0.02)
    busy_child = int(log.read_bytes().split(b"C ", 1)[1].split()[0])
    # (the busy job's child is watched too: as a rank below its launcher, it is in a watched tree and watched
    # itself, and read once a sample, counted below)
    ours = {busy.pid, busy_child, starter.pid, idle.pid}
    preads = collections.Counter()  # fd -> preads, the probes' own
    probe_loaded.set_global("os", types.SimpleNamespace(**dict(vars(os), pread=lambda fd, n, at: (
        preads.update((fd,)), os.pread(fd, n, at))[1])))
    Clock.now = time.time() + 60.0
    probe_loaded.set_global("time", Clock)
    probes = []
    for lean in (True, False):
        probe = probe_ns["Probe"]({"interval": 1, "scan_interval": scan_interval, "fact_deltas": True,
                                   "lean_sample": lean})
        probe.set_wants({"pids": sorted(ours), "tails": {"busy": str(log)}})
        # Another user's Python job on this shared machine is not the test's to watch: judged as a job
        # candidate it would be watched by both probes, and its tree starting processes would turn the lean
        # path off for COMPILER_POLL_QUIET_S at a time the test cannot tell.
        probe.candidates.consider = lambda pid, now, consider=probe.candidates.consider: (
            consider(pid, now) if pid in ours else None)
        probes.append(probe)
    # After the probes are made (their cursors checked that the real file follows pid allocation).
    probe_ns["PROC_LOADAVG"] = probe_mod("host_facts").KeptFile(str(loadavg), 128)
    lean_probe, full_probe = probes
    lean_taken, full_taken = count_lean(lean_probe), count_lean(full_probe)
    started = None
    lean_at = []
    moved_seen = []  # the steps whose frame carried the starter's new working directory
    others = []
    try:
        for step in range(48):
            if step == 2:  # a child started: the kernel handed out its pid
                os.kill(starter.pid, signal.SIGUSR1)
                started = first_line(starter, "N")
                move_mark(1, started)
            elif step == 14:
                os.kill(idle.pid, signal.SIGSTOP)
            elif step == 15:  # a fact the client has changes: at the next slow refresh, the full path sends it
                os.kill(starter.pid, signal.SIGUSR2)
                assert first_line(starter, "moved") is None
            elif step == 18:
                os.truncate(log, 0)
            elif step == 22:
                os.kill(idle.pid, signal.SIGCONT)
            elif step == 26:  # it exits and stays a zombie below its parent: the mark does not move
                os.kill(started, signal.SIGKILL)
                while state(started) != "Z":
                    time.sleep(0.01)
            elif step == 40:  # a process starts elsewhere on the host: its pid is looked at, the trees stand
                others.append(spawn(IDLE))
                move_mark(1, others[-1].pid)
            elif step == 44:  # a watched process ends and is reaped
                idle.kill()
                idle.wait()
                move_mark(-1)
            time.sleep(0.03)  # CPU moves, the log grows
            os.killpg(busy.pid, signal.SIGSTOP)  # still while both probes read them (stopped: state T)
            while state(busy.pid) != "T" or state(busy_child) != "T":
                time.sleep(0.001)
            try:
                before = lean_taken[0]
                read_before = preads.copy()
                lean_frame = wire(lean_probe.sample(), ours)
                full_frame = wire(full_probe.sample(), ours)
            finally:
                os.killpg(busy.pid, signal.SIGCONT)
            assert lean_frame == full_frame, "step %d" % step
            # The watched child read once, on either path (the lean path standing aside midway leaves the full
            # path to read afresh: that sample is left out)
            for probe, path in ((full_probe, "full"), (lean_probe, "lean")):
                if path == "lean" and lean_taken[0] == before:
                    continue
                fd = probe.files.fds[("/proc/%d/stat" % busy_child, None)]
                assert preads[fd] - read_before[fd] == 1, "step %d, the %s path" % (step, path)
            if '"cwd":%s' % json.dumps(str(elsewhere)) in lean_frame:
                moved_seen.append(step)
            if lean_taken[0] > before:
                lean_at.append(step)
            Clock.now += 1.0
    finally:
        for pid in (busy_child, started):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os.killpg(busy.pid, signal.SIGCONT)
    assert full_taken[0] == 0
    # The lean path ran where nothing was due and stood aside where something was due or unusual.
    # Full: the first two samples (no tree marks yet); a child started, and COMPILER_POLL_QUIET_S after (its
    # tree started a process); each tree walk (TREE_WALK_AT_LEAST_S), fact resend and slow fact that changed;
    # a scan's tick with a pid handed out since the last one; a zombie seen (at the
    # idle child's next read: its last read stands till then on both paths) and the quiet time after; the
    # sample after a watched process was reaped.
    lean = set(lean_at)
    assert len(lean) >= 12 and not lean & (set(range(0, 13)) | {44}), str(lean_at)
    assert len(lean & set(range(14, 22))) >= 4, str(lean_at)  # with a process stopped
    assert lean & {18, 19}, str(lean_at)  # at or right after the log's truncation
    assert len(lean & set(range(37, 44))) >= 2, str(lean_at)  # lean again after the zombie
    assert 40 in lean, str(lean_at)  # a process started elsewhere
    assert lean & {45, 46, 47}, str(lean_at)  # and after the reap
    # The slow facts are read again on the lean path (every slow_refresh, 5 s), which stands aside for the
    # sample whose facts changed; scan ticks with no pid handed out since the last are lean too.
    # (sent again in full at FACT_RESEND_S)
    assert moved_seen and 15 <= moved_seen[0] <= 20 and moved_seen[0] not in lean, (moved_seen, lean_at)
    if scan_interval < 3600:
        assert lean & set(range(16, 44, scan_interval)), str(lean_at)


def test_the_safety_walk_rides_on_resends_and_a_process_started_elsewhere_is_lean(
        probe_ns, probe_loaded, probe_mod, spawn, tmp_path):
    """A job over 75 s. It starts a child at 10 s: its tree is walked then (and the samples while it may start
    more are full, COMPILER_POLL_QUIET_S); the walk the safety net would add 30 s later rides on the sample
    that sends every fact again (FACT_RESEND_S) instead. A process started elsewhere (at 45 s, its pid read
    one by one) and one reaped elsewhere (at 50 s) are lean samples: the look at the new pid finds no parent
    in the job's tree."""
    loadavg = tmp_path / "loadavg"
    real = open("/proc/loadavg", "rb").read().split()
    total, last_pid = int(real[3].split(b"/")[1]), int(real[4])

    def move_mark(tasks, pid=None):
        nonlocal total, last_pid
        total += tasks
        last_pid = max(last_pid, pid) if pid is not None else last_pid
        loadavg.write_bytes(b"0.50 0.40 0.30 1/%d %d\n" % (total, last_pid))

    move_mark(0)
    starter = spawn(STARTER, stdout=subprocess.PIPE, text=True, env=dict(os.environ, MOVE_TO="/"))
    assert first_line(starter, "ready") is None
    Clock.now = time.time() + 60.0
    probe_loaded.set_global("time", Clock)
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600, "fact_deltas": True})
    probe.set_wants({"pids": [starter.pid]})
    probe.candidates.consider = lambda pid, now: None  # the shared machine's Python processes are not ours
    taken = count_lean(probe)
    probe_ns["PROC_LOADAVG"] = probe_mod("host_facts").KeptFile(str(loadavg), 128)
    full, walked, kids = [], [], []
    elsewhere = None
    try:
        for step in range(75):
            if step == 10:  # the job starts a child
                os.kill(starter.pid, signal.SIGUSR1)
                kids.append(first_line(starter, "N"))
                move_mark(1, kids[-1])
            elif step == 45:  # a process starts elsewhere on the host
                elsewhere = spawn(IDLE)
                move_mark(1, elsewhere.pid)
            elif step == 50:  # and is reaped
                elsewhere.kill()
                elsewhere.wait()
                move_mark(-1)
            before = taken[0]
            probe.sample()
            if taken[0] == before:
                full.append(step)
                if probe.walk.walk_trees:
                    walked.append(step)
            Clock.now += 1.0
    finally:
        for pid in kids:
            os.kill(pid, signal.SIGKILL)
    resend = int(probe_mod("frame_deltas").FACT_RESEND_S)
    assert probe_mod("tree_walk").TREE_WALK_AT_LEAST_S == resend  # (what lets the one ride on the other)
    quiet = int(probe_mod("compiler_watch").COMPILER_POLL_QUIET_S)
    assert walked == [0, 10, resend, 2 * resend], (full, walked)
    # (full while the tree may start more, and the sample that ends the compiler polls)
    assert [s for s in full if not 10 <= s <= 10 + quiet] == [0, resend, 2 * resend], full
    assert 45 not in full and 50 not in full

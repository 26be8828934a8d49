"""The look at new pids between /proc walks (JobCandidates.poll): a few pids handed out are read one by one
(their span from loadavg's last pid), not by listing /proc; threads, whose ids come from the same counter, are
left out; a listing (too many new pids) counts every pid of the span as new, one listed before too. Real
processes and threads."""

from __future__ import annotations

import subprocess

# Starts a thread that prints its kernel thread id, then waits.
THREADED = ("import threading, time\n"
            "def run(): print(threading.get_native_id(), flush=True); time.sleep(60)\n"
            "threading.Thread(target=run, daemon=True).start(); time.sleep(60)\n")


def test_the_processes_among_new_pids_are_told_from_threads(probe_ns, spawn, probe_mod):
    proc = spawn(THREADED, stdout=subprocess.PIPE, text=True)
    tid = int(proc.stdout.readline())
    first, last = min(proc.pid, tid), max(proc.pid, tid)
    leaders, raws = probe_mod("procfs").pid_leaders(first, last)
    assert proc.pid in leaders and tid not in leaders
    assert raws[proc.pid].startswith(b"%d (" % proc.pid)


def test_a_span_of_new_pids_is_read_without_listing_proc(probe_ns, spawn, probe_mod):
    candidates = probe_mod("candidates").JobCandidates()
    listings = []
    all_pids = probe_mod("candidates").all_pids
    probe_mod("candidates").all_pids = lambda: listings.append(1) or all_pids()
    candidates.poll(0.0, True)  # the first look lists /proc
    assert listings == [1]
    proc = spawn(THREADED, stdout=subprocess.PIPE, text=True)
    tid = int(proc.stdout.readline())
    span = (min(proc.pid, tid), max(proc.pid, tid))
    candidates.poll(1.0, True, span)
    assert listings == [1]  # read one by one
    born = dict(candidates.born)
    assert tid not in born and born.get(proc.pid) is not None  # the process linked to its parent, not the thread
    assert proc.pid in candidates.listed and proc.pid in candidates.seen


def test_a_listing_counts_every_pid_of_the_span_as_new(probe_ns, spawn, probe_mod):
    """A pid listed at the last look that ended and was handed out again since is new: the span says so."""
    candidates = probe_mod("candidates").JobCandidates()
    candidates.poll(0.0, True)
    proc = spawn("import time; time.sleep(60)")
    candidates.listed.add(proc.pid)  # as if listed before, by a process that ended since
    span_max = probe_mod("procfs").SPAN_LOOK_MAX
    candidates.poll(1.0, True, (proc.pid - span_max, proc.pid))  # too many to read one by one: a listing
    assert dict(candidates.born).get(proc.pid) is not None
    candidates.listed.add(proc.pid)
    candidates.poll(2.0, True, None)  # no span known: only what the last listing lacked is new
    assert proc.pid not in dict(candidates.born)

"""A watched process's frame entry is the last sample's while nothing it was built from changed, and never
once something did: real processes, real /proc."""

from __future__ import annotations

import signal
import subprocess
import time

# Sleeps; on SIGUSR1 spins for 0.3 s (its CPU time moves), then sleeps again. One idle child.
JOB = ("import signal, subprocess, time\n"
       "child = subprocess.Popen(['sleep', '60'])\n"
       "def spin(*_):\n"
       "    end = time.time() + 0.3\n"
       "    while time.time() < end: pass\n"
       "    print('spun', flush=True)\n"
       "signal.signal(signal.SIGUSR1, spin)\n"
       "print(child.pid, flush=True)\n"
       "while True: signal.pause()\n")


def test_an_unchanged_process_reuses_its_entry_and_a_changed_one_or_a_due_resend_does_not(probe_ns, spawn, probe_mod):
    job = spawn(JOB, stdout=subprocess.PIPE, text=True)
    child = int(job.stdout.readline())
    time.sleep(0.3)  # past its start-up
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600, "fact_deltas": True})
    probe.wants.pids = {job.pid}
    probe.walk.tasks.changed = lambda loadavg: False  # as on a quiet host: the child's reads are kept too

    def entry():  # (other Python processes of this host may be job candidates too)
        (proc,) = [p for p in probe.sample()["procs"] if p["pid"] == job.pid]
        return proc

    first = entry()
    assert first["cmdline"][0].startswith("/") or "python" in first["cmdline"][0]  # every fact, first time
    entries = [entry() for _ in range(3)]
    assert "cmdline" not in entries[0]  # the client has the facts: a bare entry ...
    assert entries[2] is entries[1]  # ... and while nothing changed, the same one
    assert [c["pid"] for c in entries[2]["children"]] == [child]
    job.send_signal(signal.SIGUSR1)
    assert job.stdout.readline().strip() == "spun"
    spun = entry()
    assert spun is not entries[2] and spun["cpu_s"] > entries[2]["cpu_s"]  # its CPU moved: built anew
    assert entry() is spun
    probe_mod("frame_deltas").FACT_RESEND_S = 0.2
    time.sleep(0.3)
    resent = entry()
    assert resent is not spun and resent["cmdline"] == first["cmdline"]  # every fact again when due
    assert resent["children"][0]["name"] == "sleep"

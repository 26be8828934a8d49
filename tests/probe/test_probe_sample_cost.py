"""What the probe skips to keep a sample cheap never costs a fact: real processes, real /proc."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import psutil
import pytest



@pytest.fixture
def spawn():
    started: list[subprocess.Popen] = []

    def start(code: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        try:
            kids = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        proc.kill()
        proc.wait()
        for kid in kids:  # only what our processes started, by pid
            try:
                kid.kill()
            except psutil.NoSuchProcess:
                pass


# A child started from a non-main thread, its parent having `threads` threads in all.
THREADED_PARENT = (
    "import subprocess,threading,time,sys\n"
    "ev = threading.Event()\n"
    "for _ in range({idle}): threading.Thread(target=ev.wait, daemon=True).start()\n"
    "def run():\n"
    "    p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); ev.wait()\n"
    "threading.Thread(target=run, daemon=True).start(); time.sleep(60)\n"
)


def child_pids(frame, pid):
    info = next(p for p in frame["procs"] if p["pid"] == pid)
    return {c["pid"] for c in info["children"]}


def test_few_threads_every_child_seen_between_walks(probe_ns, spawn):
    parent = spawn(THREADED_PARENT.format(idle=2))
    child = int(parent.stdout.readline())
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = {parent.pid}
    assert child in child_pids(probe.sample(), parent.pid)  # the first sample walks /proc
    walks = []
    probe.walk.scan = lambda now: walks.append(now)
    probe.walk.children_of = {}  # forget the walk's links: the kernel's children files alone must do
    for _ in range(3):
        assert child in child_pids(probe.sample(), parent.pid)  # each thread's children file
    assert walks == []


def test_many_threads_still_walk_proc_for_children_of_other_threads(probe_ns, probe_mod, spawn):
    limit = probe_mod("tree_walk").SMALL_THREAD_COUNT
    parent = spawn(THREADED_PARENT.format(idle=limit + 2))
    child = int(parent.stdout.readline())
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 0})
    probe.wants.pids = {parent.pid}
    for _ in range(3):
        assert child in child_pids(probe.sample(), parent.pid)
        assert child in probe.walk.children_of.get(parent.pid, [])  # found by the walk


def test_a_new_child_of_another_thread_is_linked_at_the_next_sample_with_no_walk(probe_ns, probe_mod, spawn, tmp_path):
    """A process with many threads has only its main thread's children file read: a child that another of
    its threads starts is linked by the look at the new pids (JobCandidates.poll), at the next sample, with
    no /proc walk between full ones (none runs without cmdline matches wanted)."""
    limit = probe_mod("tree_walk").SMALL_THREAD_COUNT
    go = tmp_path / "go"
    parent = spawn("import os, subprocess, threading, time\n"
                   "ev = threading.Event()\n"
                   "for _ in range(%d): threading.Thread(target=ev.wait, daemon=True).start()\n"
                   "def run():\n"
                   "    while not os.path.exists(%r): time.sleep(0.02)\n"
                   "    p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); ev.wait()\n"
                   "threading.Thread(target=run, daemon=True).start()\n"
                   "print('up', flush=True); time.sleep(60)\n" % (limit + 2, str(go)))
    assert parent.stdout.readline().strip() == "up"
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 0})  # a walk would be due at every sample
    probe.wants.pids = {parent.pid}
    probe.sample()  # the first: a full walk
    walks = []
    probe.walk.scan = lambda now, full=True: walks.append(full)
    go.touch()
    child = int(parent.stdout.readline())
    assert child in child_pids(probe.sample(), parent.pid)
    assert child in probe.walk.children_of.get(parent.pid, [])
    assert walks == []


def test_kept_descriptors_follow_their_process_and_close(probe_ns, spawn, probe_mod):
    files = probe_mod("procfs").ProcFiles()
    first = spawn("import time; time.sleep(60)")
    path = "/proc/%d/stat" % first.pid
    assert files.read(path).startswith(b"%d (" % first.pid)
    files.end_sample()
    before = len(os.listdir("/proc/self/fd"))
    first.kill()
    first.wait()
    assert files.read(path) is None  # gone: its descriptor reads nothing, the path is gone too
    files.end_sample()
    second = spawn("import time; time.sleep(60)")
    assert files.read("/proc/%d/stat" % second.pid).startswith(b"%d (" % second.pid)
    files.end_sample()
    files.end_sample()  # not read during that sample: closed
    assert files.fds == {} and len(os.listdir("/proc/self/fd")) <= before


def test_a_log_that_did_not_grow_reads_nothing_and_then_its_new_bytes(probe_ns, tmp_path, probe_mod):
    log = tmp_path / "train.log"
    log.write_bytes(b"one\n")
    tail = probe_mod("tails").Tail("k", str(log), 1024)
    assert tail.poll()["data"]  # the backlog
    assert tail.poll()["data"] == ""
    with open(log, "ab") as f:
        f.write(b"two\n")
    import base64
    assert base64.b64decode(tail.poll()["data"]) == b"two\n"
    tail.close()


def test_the_pid_cursor_moves_when_a_process_is_started(probe_ns, spawn, probe_mod):
    cursor = probe_mod("procfs").PidCursor()
    assert cursor.fd is not None  # /proc/loadavg follows pid allocation on this kernel
    cursor.changed()
    proc = spawn("import time; time.sleep(60)")
    assert proc.pid > 0
    assert cursor.changed()  # a new pid was handed out: the caller must look


def test_a_pid_cursor_that_cannot_tell_always_says_changed(probe_ns, probe_mod):
    cursor = probe_mod("procfs").PidCursor()
    cursor.fd = None  # as where /proc/loadavg is virtualised and its last pid never moves
    assert cursor.changed() and cursor.changed()


def test_a_short_compiler_run_is_caught_by_the_polls_between_samples(probe_ns, spawn, tmp_path, probe_mod):
    """Polls skipped while no pid is handed out must not hide a child started after them."""
    gcc = tmp_path / "gcc"  # a process's name is its program's file name
    shutil.copy("/bin/sleep", gcc)
    parent = spawn("import subprocess, sys, time\n"
                   "print('ready', flush=True); time.sleep(1.0)\n"
                   "subprocess.Popen([sys.argv[1], '0.3']).wait(); time.sleep(60)\n".replace("sys.argv[1]", repr(str(gcc))))
    assert parent.stdout.readline().strip() == "ready"
    watch = probe_mod("compiler_watch").CompilerWatch()
    watch.set_targets({parent.pid: [probe_mod("procfs").read_stat(parent.pid)]})
    deadline = time.time() + 5
    while time.time() < deadline and not watch.seen:
        watch.poll()  # quiet polls first (no new pid: skipped), then the one after the start
        time.sleep(0.05)
    assert watch.take(parent.pid) == ["gcc"]


def test_a_young_job_whose_size_did_not_change_is_not_reread_and_is_found_once_torch_maps(
        probe_ns, tmp_path, probe_mod):
    """A Python process too small to hold torch is not read at all; its maps are read once it has
    grown past the size torch needs, and found as a job then."""
    lib = tmp_path / "libtorch_cpu.so"
    with open(lib, "wb") as f:
        f.truncate(420 << 20)  # as big as the real one (sparse: no disk used); mapped, not read
    go, ready = tmp_path / "go", tmp_path / "ready"
    program = ("import mmap, os, time\n"
               "open(%r, 'w').close()\n"
               "while not os.path.exists(%r): time.sleep(0.02)\n"
               "f = open(%r, 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"  # as a dlopen maps it
               "open(%r + '.mapped', 'w').close(); time.sleep(60)\n") % (str(ready), str(go), str(lib), str(ready))
    with open(tmp_path / "out.log", "w") as log:
        job = subprocess.Popen([sys.executable, "-c", program], stdout=log)
    try:
        deadline = time.time() + 10
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.02)
        cands = probe_mod("candidates").JobCandidates()
        reads = []
        maps_have = probe_mod("candidates").maps_have
        probe_mod("candidates").maps_have = lambda pid, needles: reads.append(pid) or maps_have(pid, needles)
        now = time.time()
        seen = {job.pid: (os.getpid(), probe_mod("procfs").read_parent(job.pid)[1], "python3")}
        cands.scan(seen, now)
        cands.consider(job.pid, now)
        assert cands.found == {} and reads == []  # a plain Python: far too small to hold torch
        go.touch()
        while not (tmp_path / "ready.mapped").exists() and time.time() < deadline:
            time.sleep(0.02)
        cands.consider(job.pid, now)
        assert cands.found == {job.pid: "torch"} and reads == [job.pid]
    finally:
        job.kill()
        job.wait()


def test_a_child_started_after_a_sample_is_in_the_next_one_though_lists_are_kept(probe_ns, spawn):
    parent = spawn("import subprocess, sys, time\n"
                   "print('up', flush=True); time.sleep(0.5)\n"
                   "p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); time.sleep(60)\n")
    assert parent.stdout.readline().strip() == "up"
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = {parent.pid}
    probe.sample()
    probe.walk.scan = lambda now: None  # no walk: the kept children lists alone must see the newcomer
    assert child_pids(probe.sample(), parent.pid) == set()
    child = int(parent.stdout.readline())
    assert child in child_pids(probe.sample(), parent.pid)


def test_a_walk_between_full_ones_still_finds_a_new_matching_process(probe_ns, spawn):
    marker = "gpuwatch-walk-%d" % os.getpid()
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 0})
    probe.set_wants({"pids": [], "tails": {}, "dirs": {}, "matches": {"m": {"regex": marker}}})
    assert probe.sample()["matches"]["m"] == []
    full_walk_at = probe.walk.last_walk
    job = spawn("import time, sys; time.sleep(60)  # " + marker)
    deadline = time.time() + 5
    while time.time() < deadline:
        frame = probe.sample()
        if frame["matches"]["m"]:
            break
        time.sleep(0.05)
    assert frame["matches"]["m"] == [job.pid]
    assert probe.walk.last_walk == full_walk_at  # found by a walk that read the new pids only


def test_the_compiler_polls_rest_while_the_jobs_start_nothing_and_resume_when_one_does(probe_ns, spawn, tmp_path):
    """Between samples the compiler polls (each a wakeup) run only while a watched tree starts processes."""
    go = tmp_path / "go"
    parent = spawn("import os, subprocess, sys, time\n"
                   "print('up', flush=True)\n"
                   "while not os.path.exists(%r): time.sleep(0.02)\n"
                   # a compiler-like child: short, but it uses CPU (reaped, that CPU shows in ours)
                   "subprocess.run([sys.executable, '-c', 'sum(range(4000000))'])\n"
                   "print('ran', flush=True); time.sleep(60)\n" % str(go))
    assert parent.stdout.readline().strip() == "up"
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = {parent.pid}
    probe.sample()
    spawn("import time; time.sleep(60)")  # a process started elsewhere on the host does not count
    probe.walk.trees_moved_at = time.time() - 60  # as after a minute in which the job started nothing
    probe.sample()
    assert not probe.walk.jobs_spawning()
    go.touch()  # the job starts a short child that is gone (reaped) before the next sample
    assert parent.stdout.readline().strip() == "ran"
    probe.sample()
    assert probe.walk.jobs_spawning()


def test_children_files_are_read_again_only_for_the_parents_of_new_processes(probe_ns, spawn, tmp_path):
    """Pids handed out elsewhere on the host leave the watched trees' kept children lists alone (the
    candidates' look at the new pids names their parents); a child of a watched process is still in the
    next sample, and a child of its child too."""
    go = tmp_path / "go"
    worker = ("import subprocess, time; print(subprocess.Popen(['sleep', '60']).pid, flush=True); time.sleep(60)")
    parent = spawn("import os, subprocess, sys, time\n"
                   "print('up', flush=True)\n"
                   "while not os.path.exists(%r): time.sleep(0.02)\n"
                   "w = subprocess.Popen([sys.executable, '-c', %r], stdout=subprocess.PIPE, text=True)\n"
                   "print(w.pid, w.stdout.readline().strip(), flush=True); time.sleep(60)\n" % (str(go), worker))
    other = spawn("import time; print('up', flush=True); time.sleep(60)")
    assert parent.stdout.readline().strip() == "up" and other.stdout.readline().strip() == "up"
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = {parent.pid, other.pid}
    probe.sample()
    probe.walk.scan = lambda now, full=True: None  # no walk: the kept lists and the kernel's lists alone
    reads = []
    read = probe.files.read
    probe.files.read = lambda path, owner=None: reads.append(path) or read(path, owner)
    bystander = spawn("import time; time.sleep(60)")  # a pid handed out outside the watched trees
    probe.sample()
    assert probe.walk.pids_handed_out and bystander.pid in probe.candidates.seen
    ours = ("/proc/%d/" % parent.pid, "/proc/%d/" % other.pid)  # (other users' jobs may be watched too)
    assert not [p for p in reads if p.endswith("/children") and p.startswith(ours)]
    go.touch()
    child, grandchild = (int(x) for x in parent.stdout.readline().split())
    frame = probe.sample()
    assert {child, grandchild} <= child_pids(frame, parent.pid)
    assert not [p for p in reads if p.endswith("/children") and p.startswith(ours[1])]  # it started nothing

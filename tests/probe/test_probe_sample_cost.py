"""What the probe skips to keep a sample cheap never costs a fact: real processes, real /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from gpuwatch_tui.probe.bundle import probe_source


@pytest.fixture
def probe_ns():
    ns = {"__name__": "probe_under_test", "BUNDLE": {"modules": {}, "options": {}}}
    exec(compile(probe_source(), "agent.py", "exec"), ns)
    return ns


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
    probe.want_pids = {parent.pid}
    assert child in child_pids(probe.sample(), parent.pid)  # the first sample walks /proc
    walks = []
    probe.scan = lambda now: walks.append(now)
    probe.children_of = {}  # forget the walk's links: the kernel's children files alone must do
    for _ in range(3):
        assert child in child_pids(probe.sample(), parent.pid)  # each thread's children file
    assert walks == []


def test_many_threads_still_walk_proc_for_children_of_other_threads(probe_ns, spawn):
    limit = probe_ns["SMALL_THREAD_COUNT"]
    parent = spawn(THREADED_PARENT.format(idle=limit + 2))
    child = int(parent.stdout.readline())
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 0})
    probe.want_pids = {parent.pid}
    for _ in range(3):
        assert child in child_pids(probe.sample(), parent.pid)
        assert child in probe.children_of.get(parent.pid, [])  # found by the walk


def test_kept_descriptors_follow_their_process_and_close(probe_ns, spawn):
    files = probe_ns["ProcFiles"]()
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


def test_a_log_that_did_not_grow_reads_nothing_and_then_its_new_bytes(probe_ns, tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"one\n")
    tail = probe_ns["Tail"]("k", str(log), 1024)
    assert tail.poll()["data"]  # the backlog
    assert tail.poll()["data"] == ""
    with open(log, "ab") as f:
        f.write(b"two\n")
    import base64
    assert base64.b64decode(tail.poll()["data"]) == b"two\n"
    tail.close()

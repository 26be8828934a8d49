"""Fixed process facts sent only when they change: the real shipped probe against the client's FactCache.

Every reader must see exactly the ProcInfo a full frame gives; a process whose cwd or stdout changes
is seen; a new probe run starts from full facts; old clients and old probes keep full frames.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time

import pytest

from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv
from gpuwatch_tui.feeds.probe_frames import FactCache, parse_sample

ROOT_FACTS = ("cmdline", "cwd", "stdout", "stderr", "unbuffered", "is_python", "uid", "user")


class ShippedProbe:
    """The probe as a host runs it (bootstrap + payload on stdin), with the options a client sends."""

    def __init__(self, **options) -> None:
        self.proc = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.proc.stdin.write(build_payload({"interval": 0.2, "gpu_source": "none", **options}))
        self.proc.stdin.flush()
        self.hello = self._frame()

    def _frame(self, timeout: float = 10.0) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no frame from the probe"
        line = self.proc.stdout.readline()
        assert line, f"probe exited with {self.proc.wait(2)}"
        return json.loads(line)

    def want(self, pids: list[int]) -> None:
        self.proc.stdin.write((json.dumps({"op": "want", "pids": pids}) + "\n").encode())
        self.proc.stdin.flush()

    def sample_with(self, pid: int, timeout: float = 10.0) -> dict:
        """The next sample frame that reports `pid`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = self._frame()
            if frame.get("type") == "sample" and any(p["pid"] == pid for p in frame["procs"]):
                return frame
        raise AssertionError(f"no sample reports pid {pid}")

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def probes():
    started: list[ShippedProbe] = []

    def start(**options) -> ShippedProbe:
        p = ShippedProbe(**options)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


@pytest.fixture
def job(tmp_path):
    """A real Python job with a child, writing to a log; it moves to another cwd and log on a signal file."""
    code = (
        "import os,subprocess,sys,time\n"
        f"base={str(tmp_path)!r}\n"
        "child=subprocess.Popen(['sleep','60'])\n"
        "while not os.path.exists(os.path.join(base,'go')): time.sleep(0.05)\n"
        "os.chdir(os.path.join(base,'elsewhere'))\n"
        "fd=os.open(os.path.join(base,'second.log'),os.O_WRONLY|os.O_CREAT|os.O_APPEND)\n"
        "os.dup2(fd,1)\n"
        "open(os.path.join(base,'moved'),'w').close()\n"
        "time.sleep(60)\n"
    )
    (tmp_path / "elsewhere").mkdir()
    log = open(tmp_path / "first.log", "wb")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, cwd=tmp_path)
    deadline = time.monotonic() + 10
    while not _child_is_sleep(proc.pid):  # the test reads the child's facts: let its exec finish first
        assert time.monotonic() < deadline, "the job's sleep child never started"
        time.sleep(0.02)
    yield proc, tmp_path
    if proc.poll() is None:
        # its sleep child first, by the pid the job itself started
        for line in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split():
            subprocess.run(["kill", line], check=False)
        proc.kill()
        proc.wait()
    log.close()


def _child_is_sleep(pid: int) -> bool:
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        return bool(kids) and open(f"/proc/{kids[0]}/cmdline", "rb").read() == b"sleep\x0060\x00"
    except OSError:
        return False


def _proc(frame: dict, pid: int) -> dict:
    return next(p for p in frame["procs"] if p["pid"] == pid)


def test_facts_are_sent_once_and_filled_in_and_a_changed_cwd_and_stdout_are_seen(probes, job):
    proc, base = job
    deltas = probes(fact_deltas=True, slow_refresh=0.2)
    full = probes()  # an older client: never asks for deltas
    assert deltas.hello["fact_deltas"] is True and full.hello["fact_deltas"] is False
    for p in (deltas, full):
        p.want([proc.pid])
    cache = FactCache()
    first = deltas.sample_with(proc.pid)
    assert all(name in _proc(first, proc.pid) for name in ROOT_FACTS)
    assert "cmdline" in _proc(first, proc.pid)["children"][0]
    parse_sample(first, cache)

    later = deltas.sample_with(proc.pid)
    raw = _proc(later, proc.pid)
    assert not any(name in raw for name in ROOT_FACTS)  # nothing changed: no fixed facts on the wire
    assert "cmdline" not in raw["children"][0]
    sample = parse_sample(later, cache).procs[proc.pid]
    reference = parse_sample(full.sample_with(proc.pid)).procs[proc.pid]
    for name in ROOT_FACTS:
        assert getattr(sample, name) == getattr(reference, name), name
    assert sample.cmdline[-1].startswith("import os") and sample.cwd == str(base)
    assert sample.stdout.path == str(base / "first.log")
    assert [c.cmdline for c in sample.children] == [("sleep", "60")]

    (base / "go").touch()
    deadline = time.monotonic() + 10
    while not (base / "moved").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # past the probe's slow_refresh
    seen = None
    while time.monotonic() < deadline:
        frame = deltas.sample_with(proc.pid)
        sent = set(_proc(frame, proc.pid))  # the cache fills the frame's dicts in: look first
        seen = parse_sample(frame, cache).procs[proc.pid]
        if seen.cwd != str(base):
            assert "cwd" in sent and "cmdline" not in sent  # only what changed is sent
            break
    assert seen.cwd == str(base / "elsewhere")
    assert seen.stdout.path == str(base / "second.log")
    assert seen.cmdline[-1].startswith("import os")  # unchanged facts still filled in
    after = parse_sample(deltas.sample_with(proc.pid), cache).procs[proc.pid]
    assert after.cwd == str(base / "elsewhere") and after.stdout.path == str(base / "second.log")


def test_a_new_probe_run_starts_from_full_facts(probes, job):
    proc, _ = job
    first_run = probes(fact_deltas=True)
    first_run.want([proc.pid])
    cache = FactCache()
    parse_sample(first_run.sample_with(proc.pid), cache)
    assert "cmdline" not in _proc(first_run.sample_with(proc.pid), proc.pid)
    first_run.close()
    # A reconnect: a new probe, a new hello, a new cache on the client.
    second_run = probes(fact_deltas=True)
    second_run.want([proc.pid])
    frame = second_run.sample_with(proc.pid)
    assert all(name in _proc(frame, proc.pid) for name in ROOT_FACTS)
    info = parse_sample(frame, FactCache()).procs[proc.pid]
    assert info.cmdline[0] == sys.executable and info.children[0].cmdline == ("sleep", "60")


def test_an_old_probe_or_an_old_client_keeps_full_frames(probes, job):
    proc, _ = job
    old_client = probes()  # no fact_deltas option: the probe never strips a fact
    old_client.want([proc.pid])
    frames = [old_client.sample_with(proc.pid) for _ in range(3)]
    for frame in frames:
        raw = _proc(frame, proc.pid)
        assert all(name in raw for name in ROOT_FACTS)
        assert parse_sample(frame).procs[proc.pid].cmdline[0] == sys.executable
    # An older probe's frames (full, no fact_deltas in its hello) through a cache read the same.
    cache = FactCache()
    for frame in frames:
        assert parse_sample(json.loads(json.dumps(frame)), cache).procs[proc.pid] == parse_sample(frame).procs[proc.pid]


def _entry(pid: int, cwd: str = "/w") -> dict:
    return {"pid": pid, "start_ticks": 7, "start_time": 1.0, "cmdline": ["python", "t.py"], "cwd": cwd,
            "stdout": None, "stderr": None, "unbuffered": False, "unbuffered_reason": "", "is_python": True,
            "env_readable": True, "uid": 0, "user": "root",
            "children": [{"pid": pid + 1, "start_ticks": 8, "cmdline": ["gcc"], "uid": 0, "user": "root"}]}


def _frame(procs: list[dict], gpus: list[dict] | None = None, tails: list[dict] | None = None) -> dict:
    return {"procs": procs, "gpus": gpus or [], "tails": tails or []}


def test_a_client_that_lost_a_frame_recovers_within_the_resend_period(probe_ns, probe_mod):
    deltas = probe_mod("frame_deltas").FrameDeltas()
    resend = probe_mod("frame_deltas").FACT_RESEND_S
    cache = FactCache()
    first = [_entry(10)]
    deltas.apply(_frame(first), 100.0)  # this frame never reaches the client (dropped as malformed)
    second = [_entry(10)]
    deltas.apply(_frame(second), 101.0)
    assert "cmdline" not in second[0]
    seen = parse_sample(_frame(second), cache).procs[10]
    assert seen.cmdline == () and seen.children[0].cmdline == ()  # the client cannot know: defaults until the resend
    third = [_entry(10)]
    deltas.apply(_frame(third), 100.0 + resend)
    seen = parse_sample(_frame(third), cache).procs[10]
    assert seen.cmdline == ("python", "t.py") and seen.children[0].cmdline == ("gcc",)
    fourth = [_entry(10)]
    deltas.apply(_frame(fourth), 101.0 + resend)
    assert "cmdline" not in fourth[0]
    seen = parse_sample(_frame(fourth), cache).procs[10]
    assert seen.cmdline == ("python", "t.py") and seen.children[0].cmdline == ("gcc",)


def test_a_process_that_leaves_and_returns_is_sent_in_full_and_a_shared_child_is_filled(probe_ns, probe_mod):
    deltas = probe_mod("frame_deltas").FrameDeltas()
    cache = FactCache()
    frame = [_entry(10), _entry(20)]
    frame[1]["children"] = [dict(frame[0]["children"][0])]  # one child seen under two roots
    deltas.apply(_frame(frame), 1.0)
    assert "cmdline" in frame[0]["children"][0] and "cmdline" not in frame[1]["children"][0]
    assert parse_sample(_frame(frame), cache).procs[20].children[0].cmdline == ("gcc",)
    gone = [_entry(20)]
    deltas.apply(_frame(gone), 2.0)
    parse_sample(_frame(gone), cache)
    back = [_entry(10, cwd="/other")]
    deltas.apply(_frame(back), 3.0)
    assert back[0]["cmdline"] == ["python", "t.py"]  # forgotten on both sides: sent again
    assert parse_sample(_frame(back), cache).procs[10].cwd == "/other"


def _gpu(util: float, procs: list[int]) -> dict:
    return {"index": 0, "uuid": "GPU-1", "name": "NVIDIA H200", "util_pct": util, "mem_used_mib": 1139.0,
            "mem_total_mib": 143771.0, "temp_c": 55, "power_w": 690.1, "power_limit_w": 700.0,
            "sm_clock_mhz": 1980, "processes": [{"pid": p, "mem_used_mib": 500.0} for p in procs]}


def _tail(data: str = "", size: int = 10, mtime: float = 5.0, reset: bool = False) -> dict:
    return {"key": "job", "path": "/w/train.log", "data": data, "reset": reset, "skipped": 0,
            "size": size, "mtime": mtime, "error": None, "cut": []}


def test_gpus_and_tails_are_sent_as_deltas_and_read_as_full_frames(probe_ns, probe_mod):
    """Each frame through FrameDeltas then FactCache parses exactly as the full frame does."""
    deltas = probe_mod("frame_deltas").FrameDeltas()
    cache = FactCache()
    script = [
        (_gpu(97, [10]), _tail("c3RlcAo=", 10, 5.0)),
        (_gpu(97, [10]), _tail()),  # nothing new: the tail's size and mtime are unchanged
        (_gpu(40, [10, 11]), _tail("c3RlcAo=", 15, 6.0)),
        (_gpu(40, []), _tail("", 0, 7.0, reset=True)),  # truncated; the GPU's processes left
        (_gpu(40, []), _tail()),  # a size and mtime of two frames ago: sent again, not taken for the last
    ]
    for t, (gpu, tail) in enumerate(script):
        full = {"t": float(t), "procs": [_entry(10)], "gpus": [dict(gpu)], "tails": [dict(tail)]}
        sent = json.loads(json.dumps({"t": float(t), "procs": [_entry(10)], "gpus": [gpu], "tails": [tail]}))
        deltas.apply(sent, float(t))
        sent = json.loads(json.dumps(sent))  # as the wire carries it
        if t == 1:
            assert set(sent["gpus"][0]) == {"index", "util_pct", "mem_used_mib", "temp_c", "power_w", "sm_clock_mhz"}
            # a log that did not grow: its key and size (the size is sent every frame: a growing log's moves at
            # every poll)
            assert sent["tails"] == [{"key": "job", "size": 10}]
            assert not set(sent["procs"][0]) & {"cmdline", "cwd", "start_time", "user"}
        assert parse_sample(sent, cache) == parse_sample(full)


def test_facts_that_change_back_and_forth_always_read_as_the_full_frame(probe_ns, probe_mod):
    """Facts equal to the last entry's are all left out at once; any change, back to an older value
    too, is sent; a resend sends everything: each frame still parses as its full frame does."""
    import random

    rng = random.Random(7)
    deltas = probe_mod("frame_deltas").FrameDeltas()
    resend = probe_mod("frame_deltas").FACT_RESEND_S
    cache = FactCache()
    cwds, users = ["/w", "/w/run", "/elsewhere"], ["root", "ann"]
    left_out = 0
    for t in range(120):
        entry = _entry(10, cwd=rng.choice(cwds) if rng.random() < 0.3 else "/w")
        entry["user"] = rng.choice(users) if rng.random() < 0.2 else "root"
        entry.update(dist=None, ppid=1, name="python", sid=5, pgid=5)  # every fact, as the probe sends
        entry["children"][0].update(ppid=10, name="gcc", start_time=2.0)
        if rng.random() < 0.3:
            entry["children"][0]["cmdline"] = ["gcc", str(rng.randrange(3))]
        now = t * resend / 40.0  # three resend periods
        full = {"t": now, "procs": [json.loads(json.dumps(entry))], "gpus": [], "tails": []}
        sent = {"t": now, "procs": [entry], "gpus": [], "tails": []}
        deltas.apply(sent, now)
        sent = json.loads(json.dumps(sent))
        left_out += "cmdline" not in sent["procs"][0]
        assert parse_sample(sent, cache) == parse_sample(full)
    assert left_out > 40  # mostly unchanged: mostly left out
    assert deltas.roots[(10, 7)][1] is not None  # ... by comparing all facts at once

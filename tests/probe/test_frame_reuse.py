"""The frame parser reuses what it parsed last frame: the result must equal a fresh parse of the full frame.

A real shipped probe (full frames) samples a real job whose facts move: CPU time, a new child, a new
cwd and stdout, a child that ends.
Each full frame goes through the probe's own FrameDeltas (as the wire carries it) and then through
one FactCache; every HostSample and its grouping key must equal those of the full frame parsed
afresh, and unchanged processes and GPUs must really be the last frame's objects (the reuse is
exercised, not bypassed). A scripted run adds GPUs, zombies, a reused pid, resent facts and a
malformed frame.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time

import pytest

from gpuwatch_tui.jobs.grouping_reuse import frame_key
from gpuwatch_tui.model import HostSample
from gpuwatch_tui.feeds.probe_frames import FactCache, parse_sample

from .test_fact_deltas import ShippedProbe


def _fresh_key(sample: HostSample) -> tuple:
    """The grouping key computed from the parsed objects alone (what a frame without a cache gets)."""
    bare = copy.copy(sample)
    bare.procs_key = bare.gpus_key = None
    return frame_key(bare)


class DeltaReader:
    """Full frames -> the probe's FrameDeltas -> JSON -> one FactCache, checked against a fresh parse."""

    def __init__(self, frame_deltas) -> None:
        self.deltas = frame_deltas.FrameDeltas()
        self.cache = FactCache()
        self.last: HostSample | None = None
        self.reused_procs = self.reused_gpus = 0

    def read(self, full: dict, now: float) -> HostSample:
        sent = json.loads(json.dumps(full))
        self.deltas.apply(sent, now)
        sent = json.loads(json.dumps(sent))  # as the wire carries it
        fresh = parse_sample(json.loads(json.dumps(full)))
        got = parse_sample(sent, self.cache)
        assert got == fresh
        assert frame_key(got) == _fresh_key(fresh)
        assert got.procs_key is not None and got.gpus_key is not None  # the parser's own keys were used
        if self.last is not None:
            # a process rebuilt for its new CPU time still carries the last frame's fixed facts
            self.reused_procs += sum(p.pid in self.last.procs and p.cmdline is self.last.procs[p.pid].cmdline
                                     for p in got.procs.values())
            self.reused_gpus += sum(g is o for g, o in zip(got.gpus, self.last.gpus))
        self.last = got
        return got


@pytest.fixture
def moving_job(tmp_path):
    """A real job whose facts move step by step, each step started by a file the test creates."""
    code = (
        "import os,subprocess,sys,time\n"
        f"base={str(tmp_path)!r}\n"
        "def wait(name):\n"
        "    while not os.path.exists(os.path.join(base,name)):\n"
        "        sum(range(20000)); time.sleep(0.01)\n"  # CPU time moves while it waits
        "keep=subprocess.Popen(['sleep','60'])\n"
        "wait('1')\n"
        "more=subprocess.Popen(['sleep','61'])\n"
        "wait('2')\n"
        "os.chdir(os.path.join(base,'elsewhere'))\n"
        "fd=os.open(os.path.join(base,'second.log'),os.O_WRONLY|os.O_CREAT|os.O_APPEND)\n"
        "os.dup2(fd,1)\n"
        "wait('3')\n"
        "keep.kill(); keep.wait()\n"
        "wait('never')\n"
    )
    (tmp_path / "elsewhere").mkdir()
    log = open(tmp_path / "first.log", "wb")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, cwd=tmp_path)
    yield proc, tmp_path
    if proc.poll() is None:
        for kid in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split():
            subprocess.run(["kill", kid], check=False)
        proc.kill()
    proc.wait()
    log.close()


def test_a_real_job_read_through_deltas_and_the_cache_equals_a_fresh_parse(probe_ns, probe_mod, moving_job):
    proc, base = moving_job
    probe = ShippedProbe(interval=0.1, slow_refresh=0.1)  # full frames: no fact_deltas asked
    try:
        probe.want([proc.pid])
        reader = DeltaReader(probe_mod("frame_deltas"))
        seen: list[HostSample] = []

        def frames(n: int) -> None:
            for _ in range(n):
                full = probe.sample_with(proc.pid)
                seen.append(reader.read(full, time.monotonic()))

        frames(6)
        # Each step's change is seen before the next step starts (a process's cwd and output that read the same
        # for a while are read less often: up to 12 x slow_refresh apart), then read unchanged for a few frames.
        moved = {"1": lambda p: len(p.children) == 2, "2": lambda p: p.cwd == str(base / "elsewhere"),
                 "3": lambda p: len(p.children) == 1}
        for step in ("1", "2", "3"):
            (base / step).touch()
            deadline = time.monotonic() + 10
            while not (seen and moved[step](seen[-1].procs[proc.pid])):
                assert time.monotonic() < deadline, step
                frames(1)
            frames(3)
    finally:
        probe.close()
    mine = [s.procs[proc.pid] for s in seen]
    # The job's facts really moved while it was read, so the cache had changes to follow.
    assert mine[0].cwd == str(base) and mine[-1].cwd == str(base / "elsewhere")
    assert mine[0].stdout.path == str(base / "first.log") and mine[-1].stdout.path == str(base / "second.log")
    assert {len(p.children) for p in mine} == {1, 2}
    assert len({p.cpu_s for p in mine}) > 2
    assert len({frame_key(s) for s in seen}) >= 4  # the grouping key changed with the facts
    # ... and unchanged processes were the last frame's very objects (the reuse was exercised).
    assert reader.reused_procs >= 15


def _entry(pid: int, ticks: int = 7, cwd: str = "/w", state: str = "S", cpu: float = 1.0,
           kids: tuple[int, ...] = (100,), threads: int = 3, kid_cmd: str = "w") -> dict:
    return {"pid": pid, "ppid": 1, "start_time": 1.0 + pid, "start_ticks": ticks, "name": "python",
            "cmdline": ["python", "t.py"], "cwd": cwd, "state": state, "cpu_s": cpu, "cpu_children_s": 0.5,
            "rss_bytes": 1 << 20, "threads": threads, "sid": pid, "pgid": pid,
            "stdout": {"path": "/w/log", "kind": "file", "append": False, "size": 10},
            "stderr": None, "unbuffered": False, "unbuffered_reason": "", "is_python": True,
            "env_readable": True, "uid": 0, "user": "root", "dist": {"RANK": "0"},
            "children": [{"pid": k, "ppid": pid, "name": kid_cmd, "state": "S", "cpu_s": 0.0, "start_time": 2.0,
                          "start_ticks": 9, "cmdline": [kid_cmd], "uid": 0, "user": "root"} for k in kids]}


def _gpu(index: int, power: float, pids: tuple[int, ...]) -> dict:
    return {"index": index, "uuid": f"GPU-{index}", "name": "NVIDIA H200", "util_pct": 99.0,
            "mem_used_mib": 1139.0, "mem_total_mib": 143771.0, "temp_c": 55, "power_w": power,
            "power_limit_w": 700.0, "sm_clock_mhz": 1980, "processes": [{"pid": p, "mem_used_mib": 500.0} for p in pids]}


def test_scripted_frames_with_gpus_resends_and_a_bad_frame_equal_a_fresh_parse(probe_ns, probe_mod):
    resend = probe_mod("frame_deltas").FACT_RESEND_S
    script = [
        ([_entry(10), _entry(20)], [_gpu(0, 690.0, (10,)), _gpu(1, 80.0, ())]),
        ([_entry(10), _entry(20)], [_gpu(0, 690.0, (10,)), _gpu(1, 80.0, ())]),  # all the same
        ([_entry(10, cpu=2.0), _entry(20)], [_gpu(0, 691.0, (10,)), _gpu(1, 80.0, ())]),  # CPU and power move
        ([_entry(10, cpu=2), _entry(20)], [_gpu(0, 691.0, (10,)), _gpu(1, 80.0, ())]),  # the same CPU, as an int
        ([_entry(10, cpu=2.0, threads=4), _entry(20, kid_cmd="gcc")], [_gpu(0, 691.0, (10,)), _gpu(1, 80.0, ())]),
        ([_entry(10, cpu=2.0, kids=(100, 101)), _entry(20)], [_gpu(0, 691.0, (10, 20)), _gpu(1, 80.0, ())]),
        ([_entry(10, cpu=2.0, cwd="/x"), _entry(20, state="Z")], [_gpu(0, 691.0, (10,)), _gpu(1, 80.0, ())]),
        ([_entry(10, ticks=8), _entry(20, state="Z")], [_gpu(0, 691.0, (10,))]),  # pid 10 reused; a GPU gone
        ([_entry(10, ticks=8)], [_gpu(0, 691.0, (10,)), _gpu(1, 80.0, ())]),
    ]
    reader = DeltaReader(probe_mod("frame_deltas"))
    t = 0.0
    for procs, gpus in script:
        tail = {"key": "j1", "path": "/w/log", "data": "c3RlcAo=" if t % 2 else "", "reset": False, "skipped": 0,
                "size": 10 + int(t) // 2, "mtime": 5.0 + int(t) // 2, "error": None, "cut": []}
        reader.read({"t": t, "procs": procs, "gpus": gpus, "tails": [tail]}, t)
        t += 1.0
    assert reader.reused_procs >= 3 and reader.reused_gpus >= 3
    # Like the probe, the cache keeps only the latest frame's entries (pid 20 and a GPU left).
    assert len(reader.cache._procs) == len(reader.last.procs) == 1 and len(reader.cache._gpus) == 2
    # The probe sends every fact again after a while: equal values keep the objects.
    last = reader.last
    again = reader.read({"t": t, "procs": [_entry(10, ticks=8)], "gpus": [_gpu(0, 691.0, (10,)),
                                                                            _gpu(1, 80.0, ())], "tails": []},
                        t + resend)
    assert again.procs[10] is last.procs[10] and again.gpus[1] is last.gpus[1]
    # Only the log's size moved: the process is parsed again, its grouping key stays the same object.
    grown = _entry(10, ticks=8)
    grown["stdout"]["size"] = 99
    after = reader.read({"t": t, "procs": [grown], "gpus": [], "tails": []}, t + resend + 0.5)
    assert after.procs[10].stdout.size == 99 and after.procs_key[0] is again.procs_key[0]
    assert after.procs[10].cmdline is again.procs[10].cmdline  # the last record with its new target, not parsed anew
    # The target itself moves, with the CPU time (sent as an integer: read as the float a fresh parse gives).
    moved = _entry(10, ticks=8, cpu=4)
    moved["stdout"]["path"] = "/w/other.log"
    later = reader.read({"t": t, "procs": [moved], "gpus": [], "tails": []}, t + resend + 0.7)
    assert later.procs[10].stdout.path == "/w/other.log" and type(later.procs[10].cpu_s) is float
    assert later.procs_key[0] != after.procs_key[0] and later.procs[10].cmdline is after.procs[10].cmdline
    # A frame that fails to parse is dropped; the next one still reads as its full frame does.
    bad = {"t": t, "procs": [_entry(10, ticks=8, cpu="many")], "gpus": [], "tails": []}
    reader.deltas.apply(bad, t + resend + 1)
    with pytest.raises(ValueError):
        parse_sample(json.loads(json.dumps(bad)), reader.cache)
    reader.read({"t": t, "procs": [_entry(10, ticks=8, cpu=3.0, cwd="/y")], "gpus": [], "tails": []}, t + resend + 2)
    assert reader.last.procs[10].cwd == "/y"


def test_a_frame_without_a_cache_has_no_parser_keys_and_frame_key_reads_the_objects():
    full = {"t": 1.0, "procs": [_entry(10)], "gpus": [_gpu(0, 690.0, (10,))], "tails": []}
    plain = parse_sample(full)
    assert plain.procs_key is None and plain.gpus_key is None
    cached = parse_sample(json.loads(json.dumps(full)), FactCache())
    assert frame_key(plain) == frame_key(cached) and plain == cached

"""The store on frames read through the frame parser's cache: GPUs that leave or are swapped, and
processes whose objects the parser reused, give the records and CPU rates a fresh parse gives."""

from __future__ import annotations

import json

from gpuwatch_tui.feeds.probe_frames import FactCache, parse_sample
from gpuwatch_tui.store import Store, process_cpu_pct


def _frame(t: float, gpus: list[tuple[int, str]], cpu: float) -> dict:
    return {
        "t": t,
        "gpus": [{"index": i, "uuid": uuid, "name": "NVIDIA H200", "util_pct": 50.0, "mem_used_mib": 10.0,
                  "mem_total_mib": 100.0, "power_w": 300.0} for i, uuid in gpus],
        "procs": [{"pid": 7, "start_ticks": 1, "start_time": 5.0, "cmdline": ["python", "t.py"], "cpu_s": cpu,
                   "children": []},
                  {"pid": 8, "start_ticks": 2, "start_time": 6.0, "cmdline": ["sleep"], "cpu_s": 1.0,
                   "children": []}],
        "tails": [],
    }


def test_store_records_from_cached_frames_equal_those_from_fresh_frames():
    script = [
        _frame(0.0, [(0, "GPU-a"), (1, "GPU-b")], 10.0),
        _frame(1.0, [(0, "GPU-a"), (1, "GPU-b")], 10.5),
        _frame(2.0, [(0, "GPU-a")], 11.5),  # GPU 1 no longer reported
        _frame(3.0, [(0, "GPU-a"), (2, "GPU-c")], 11.5),  # another one appears (same count as two frames ago)
        _frame(4.0, [(0, "GPU-z"), (2, "GPU-c")], 12.0),  # GPU 0 swapped: a new record
    ]
    cached, fresh = Store(["h"], 10), Store(["h"], 10)
    facts = FactCache()
    for frame in script:
        cached.apply_sample("h", parse_sample(json.loads(json.dumps(frame)), facts))
        fresh.apply_sample("h", parse_sample(json.loads(json.dumps(frame))))
        a, b = cached.hosts["h"], fresh.hosts["h"]
        assert sorted(a.gpus) == sorted(b.gpus)
        for i in a.gpus:
            assert a.gpus[i].latest == b.gpus[i].latest
            assert list(a.gpus[i].util_history) == list(b.gpus[i].util_history)
        assert a.proc_cpu_pct == b.proc_cpu_pct
    rec = cached.hosts["h"]
    assert sorted(rec.gpus) == [0, 2] and rec.gpus[0].latest.uuid == "GPU-z" and len(rec.gpus[0].util_history) == 1
    assert rec.proc_cpu_pct == {7: 50.0, 8: 0.0}


def test_process_cpu_read_when_asked_equals_the_rate_of_the_last_two_samples():
    """`proc_cpu_pct` is made when read, not on every sample: read on some frames only (as a screen
    shows one host), it equals the rate between that frame and the one before, computed there."""
    frames = [_frame(float(t), [(0, "GPU-a")], 10.0 + 0.5 * t * t) for t in range(8)]
    frames[5]["procs"][1]["start_time"] = 9.0  # pid 8 restarted: no rate across the two runs
    store, facts = Store(["h"], 10), FactCache()
    rec = store.hosts["h"]
    assert rec.proc_cpu_pct == {}
    before = None
    for i, frame in enumerate(frames):
        sample = parse_sample(json.loads(json.dumps(frame)), facts)
        store.apply_sample("h", sample)
        want = process_cpu_pct(before.procs, sample.procs, before.time, sample.time) if before else {}
        if i % 3 != 1:  # some frames are not read at all
            assert rec.proc_cpu_pct == want, i
            assert rec.proc_cpu_pct == want  # (and read twice)
        before = sample
    assert rec.proc_cpu_pct[7] == 650.0 and 8 not in process_cpu_pct(
        parse_sample(json.loads(json.dumps(frames[4]))).procs, parse_sample(json.loads(json.dumps(frames[5]))).procs,
        4.0, 5.0)

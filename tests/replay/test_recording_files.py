"""The recording format on its own: round trip of deltas, damage, versions, --at."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch_tui.demo import demo_recording
from gpuwatch_tui.probe import gpu_metrics
from gpuwatch_tui.model import ChildProc, FdTarget, GpuProcess, GpuSample, HostSample, ProcInfo
from gpuwatch_tui.recording import RecordingError, RecordingWriter, Replay, Timeline, read_recording
from gpuwatch_tui.recording import format as fmt
from gpuwatch_tui.recording.at_time import parse_at
from gpuwatch_tui.recording.encoder import TickEncoder, window_delta

T0 = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def proc(pid: int, cpu: float, children: int = 0) -> ProcInfo:
    kids = tuple(ChildProc(pid + 100 + i, "cc1", ("cc1", "-O2"), "R", cpu / 10, 900 + i) for i in range(children))
    return ProcInfo(pid, 1, T0 - 50, "python3", ("python3", "train.py", "--lr", "3e-4"), "/work", "R", cpu, 0.5,
                    2 << 30, 12, pid, pid, kids, FdTarget("/work/train.log", "file", True, 100), None, False, "",
                    True, True, 12345 + pid, 1000, "ana")


def gpu(index: int, util: float, pid: int | None = None) -> GpuSample:
    procs = (GpuProcess(pid, 40_000.0),) if pid else ()
    return GpuSample(index, f"GPU-{index}", "NVIDIA H200", util, 40_000.0, 143_771.0, 50.0, 600.0, 700.0, 1980.0,
                     processes=procs)


def job(phase: str, t: float, step: int, points: list[dict]) -> dict:
    return {"id": "a:10:1", "name": "train.py", "host": "a", "phase": phase, "since": T0, "evidence": [f"step {step}"],
            "pids": [10], "gpus": [0], "progress": {"step": step}, "progress_history": points, "history":
            [{"phase": phase, "since": T0}], "processes": [{"pid": 10, "start_ticks": 12355}]}


def write_sample_recording(path, ticks: int = 30, cut_damage: bool = False):
    """A recording with one host, one job; returns what was fed in at each tick for comparison."""
    enc = TickEncoder()
    w = RecordingWriter(path, fmt.header(["a"], {"sample_interval": 1.0, "history": 8}, T0))
    fed = []
    points: list[dict] = []
    log: list[str] = []
    for i in range(ticks):
        t = T0 + i
        procs = {10: proc(10, 1.0 * i, children=i % 3)}
        enc.sample("a", HostSample(t - 0.5, "nvml", [gpu(0, 10.0 * (i % 10), 10), gpu(1, 0.0)], dict(procs)))
        enc.sample("a", HostSample(t - 0.1, "nvml", [gpu(0, 5.0, 10), gpu(1, 1.0)], dict(procs), cpu_count=8))
        points = (points + [{"time": t, "step": i, "total": None, "loss": 1.0 / (i + 1), "epoch": None}])[-5:]
        log.extend(f"step {i} line {k}" for k in range(i % 4))
        phase = "training" if i < 20 else "stalled"
        jobs = [job(phase, t, i, points)] if i < 25 else []
        logs = {"a:10:1": (log[-50:], len(log))} if i < 25 else {}
        line = enc.tick(t, {"a": {"state": "connected" if i != 7 else "reconnecting"}}, jobs, logs,
                        {"a:10:1": list(procs.values())} if i < 25 else {}, {})
        w.write(line)
        fed.append((t, jobs, list(log), procs))
    w.close()
    return fed


def test_round_trip_rebuilds_what_was_fed(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    fed = write_sample_recording(path)
    timeline = Timeline.open(path)
    assert timeline.damage is None and len(timeline.ticks) == 30
    replay = Replay(timeline, history=8)
    for t, jobs, log, procs in fed:
        replay.seek(t)
        views = timeline.jobs_at(t)
        assert [v.to_json() for v in views] == [type(v).from_json(j).to_json() for v, j in zip(views, jobs)]
        assert len(views) == len(jobs)
        if jobs:
            lines, total = timeline.log_at("a:10:1", t)
            assert total == len(log) and lines == log[-len(lines):] and len(lines) == min(len(log), total)
            assert timeline.procs_at("a:10:1", t) == list(procs.values())
        host = replay.store.hosts["a"]
        assert host.gpus[0].latest == gpu(0, 5.0, 10) and host.last_sample_time == t - 0.1
        assert host.procs == procs
        assert host.state == ("reconnecting" if t == T0 + 7 else "connected")
    # Back in time rebuilds the history window exactly as a forward pass left it.
    replay.seek(T0 + 12)
    forward = list(replay.store.hosts["a"].gpus[0].util_history)
    replay.seek(T0 + 29)
    replay.seek(T0 + 12)
    assert list(replay.store.hosts["a"].gpus[0].util_history) == forward and len(forward) == 8


def test_phase_changes_and_seek_lands_on_them(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    write_sample_recording(path)
    timeline = Timeline.open(path)
    assert [(c - T0, p) for c, _, p in timeline.phase_changes] == [(0, "training"), (20, "stalled")]
    assert timeline.next_phase_change(T0 + 3) == T0 + 20
    assert timeline.previous_phase_change(T0 + 20) == T0
    assert timeline.next_phase_change(T0 + 20) is None


def test_window_delta_sends_only_new_points():
    old = [{"s": i} for i in range(5)]
    new = old[2:] + [{"s": 5}, {"s": 6}]
    assert window_delta(old, new) == [2, [{"s": 5}, {"s": 6}]]
    assert window_delta([], new) == [0, new]
    assert window_delta(old, [{"s": 9}]) == [5, [{"s": 9}]]


def test_a_truncated_recording_opens_up_to_the_damage(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    write_sample_recording(path)
    data = path.read_bytes()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    loaded = read_recording(cut)
    assert 0 < len(loaded.lines) < 30
    assert "cut short or damaged" in loaded.damage and "replaying up to" in loaded.damage
    assert loaded.damage.startswith("cut.jsonl.gz: line ")
    Replay(Timeline(loaded)).seek(T0 + 100)  # what is there replays


def test_a_corrupt_line_stops_there_with_its_number(tmp_path):
    plain = tmp_path / "r.jsonl"
    write_sample_recording(plain, ticks=10)
    lines = plain.read_text().splitlines(keepends=True)
    lines[6] = lines[6][:40] + "\x00garbage\n"
    plain.write_text("".join(lines))
    loaded = read_recording(plain)
    assert len(loaded.lines) == 5
    assert "line 7: not a complete JSON object" in loaded.damage
    # Gzip'd garbage in the middle: the CRC/stream check stops it, with what was read before.
    gz = tmp_path / "bad.jsonl.gz"
    write_sample_recording(gz, ticks=30)
    raw = bytearray(gz.read_bytes())
    for i in range(len(raw) // 2, len(raw) // 2 + 64):
        raw[i] ^= 0xFF
    gz.write_bytes(bytes(raw))
    loaded = read_recording(gz)
    assert loaded.damage and len(loaded.lines) < 30


def test_not_a_recording_and_newer_versions_are_clear_errors(tmp_path):
    snap = tmp_path / "watch.jsonl"
    snap.write_text(json.dumps({"version": 1, "time": T0, "hosts": [], "jobs": []}) + "\n")
    with pytest.raises(RecordingError, match="not a gpuwatch recording"):
        read_recording(snap)
    newer = tmp_path / "new.jsonl.gz"
    with gzip.open(newer, "wt") as f:
        f.write(json.dumps(dict(fmt.header(["a"], {}, T0), version=fmt.VERSION + 1)) + "\n")
    with pytest.raises(RecordingError, match="newer than this gpuwatch reads"):
        read_recording(newer)
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(b"")
    with pytest.raises(RecordingError, match="no header line"):
        read_recording(empty)
    with pytest.raises(RecordingError, match="cannot read"):
        read_recording(tmp_path / "missing.jsonl.gz")


def test_writer_never_overwrites(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(b"keep")
    with pytest.raises(RecordingError, match="already exists"):
        RecordingWriter(path, fmt.header(["a"], {}, T0))
    assert path.read_bytes() == b"keep"


@pytest.mark.parametrize("text, expected", [
    ("+90s", T0 + 90), ("+2m", T0 + 120), ("-1m", T0 + 3540), ("end", T0 + 3600), ("start", T0),
    (str(T0 + 5), T0 + 5), ("+5h", T0 + 3600), ("2027-01-15T08:00:30Z", T0 + 30),
    ("08:01", T0 + 60),
])
def test_at_times(text, expected):
    assert T0 == 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
    assert parse_at(text, T0, T0 + 3600) == expected


@pytest.mark.parametrize("text", ["yesterday", "25:00", "+5x", ""])
def test_bad_at_times_say_what_is_accepted(text):
    with pytest.raises(RecordingError, match=r"expected \+90s"):
        parse_at(text, T0, T0 + 3600)


def test_bundled_demo_is_small_and_has_many_phases():
    path = demo_recording()
    assert path.stat().st_size < 1_000_000
    timeline = Timeline.open(path)
    assert timeline.damage is None and len(timeline.hosts) >= 3
    phases = {p for _, _, p in timeline.phase_changes}
    assert {"starting", "compiling", "training", "silent", "stalled", "crashed", "finished"} <= phases


def test_a_sample_timed_just_past_its_tick_is_shown_at_that_tick(tmp_path):
    # The live view at a tick holds every sample received by then, even one whose time (the host's
    # clock, corrected by an estimated offset) is a few ms past the tick's: the replay must show it too.
    replay = _replay_of_ticks(tmp_path / "skew.jsonl.gz", lambda i, t: [
        HostSample(t + 0.004, "nvml", [gpu(0, 10.0 * i)], {}, cpu_pct=float(i))])
    for i in (1, 3, 2, 0):  # forward, then back (a rebuild)
        replay.seek(T0 + i)
        assert replay.store.hosts["a"].cpu_pct == float(i), i
        assert list(replay.store.hosts["a"].gpus[0].util_history)[-1] == 10.0 * i


def test_a_sample_timed_before_a_tick_but_written_after_it_is_not_shown_at_that_tick(tmp_path):
    # A frame the probe stamped just before a tick but that arrived after it: the live view at that tick
    # did not have it, so the replay must not show it there either, only after that tick.
    replay = _replay_of_ticks(tmp_path / "late.jsonl.gz", lambda i, t: [
        HostSample(t - 1.0004, "nvml", [gpu(0, 10.0 * i)], {}, cpu_pct=float(i)),
        HostSample(t - 0.5, "nvml", [gpu(0, 10.0 * i + 5)], {}, cpu_pct=i + 0.5)])
    for i in (1, 3, 2, 0, 1):  # forward, then back (a rebuild)
        replay.seek(T0 + i)
        assert replay.store.hosts["a"].cpu_pct == i + 0.5, i
        assert list(replay.store.hosts["a"].gpus[0].util_history)[-2:] == [10.0 * i, 10.0 * i + 5], i


def _replay_of_ticks(path, samples_at) -> Replay:
    """A recording of host "a" with four ticks at T0 + i, the line of tick i carrying samples_at(i, t)."""
    enc = TickEncoder()
    w = RecordingWriter(path, fmt.header(["a"], {"sample_interval": 1.0, "history": 8}, T0))
    for i in range(4):
        t = T0 + i
        for sample in samples_at(i, t):
            enc.sample("a", sample)
        w.write(enc.tick(t, {"a": {"state": "connected"}}, [], {}, {}, {}))
    w.close()
    return Replay(Timeline.open(path), history=8)


def as_version_1(src, dst) -> None:
    """`src` rewritten as gpuwatch wrote recordings before their header named the GPU columns: version 1,
    no gpu_columns, and each GPU row the fixed util, mem, temp, power, clock."""
    columns = list(gpu_metrics.READINGS)
    keep = [columns.index(name) for name in gpu_metrics.V1_ROW]
    with gzip.open(src, "rt") as f:
        lines = [json.loads(line) for line in f]
    header = {k: v for k, v in lines[0].items() if k != "gpu_columns"}
    header["version"] = 1
    for line in lines[1:]:
        for samples in (line.get("samples") or {}).values():
            for sample in samples:
                sample["gpus"] = [[row[0], *[row[1 + i] for i in keep], row[-1]] for row in sample["gpus"]]
    with gzip.open(dst, "wt") as f:
        f.writelines(json.dumps(line) + "\n" for line in [header, *lines[1:]])


def test_a_version_1_recording_replays_its_gpus_and_leaves_later_metrics_unknown(tmp_path):
    now, old = tmp_path / "now.jsonl.gz", tmp_path / "v1.jsonl.gz"
    write_sample_recording(now, ticks=6)
    assert json.loads(gzip.open(now, "rt").readline())["gpu_columns"] == list(gpu_metrics.READINGS)
    as_version_1(now, old)
    current, legacy = Timeline.open(now), Timeline.open(old)
    assert legacy.damage is None and legacy.gpu_columns == gpu_metrics.V1_ROW
    assert len(legacy.samples["a"]) == len(current.samples["a"]) == 12
    for i in range(12):
        want, got = current.sample("a", i), legacy.sample("a", i)
        # every metric a version-1 row had reads back as written; one it had no column for is not known
        assert got.gpus == [dataclasses.replace(g, **{n: None for n in gpu_metrics.READINGS if n not in gpu_metrics.V1_ROW})
                            for g in want.gpus]
    assert got.gpus[0].util_pct == 5.0 and got.gpus[0].sm_clock_mhz == 1980.0 and got.gpus[0].mem_clock_mhz is None


def test_the_bundled_demo_and_the_published_recordings_still_replay():
    timeline = Timeline.open(demo_recording())
    assert timeline.header["version"] == 1 and timeline.damage is None
    for host in timeline.hosts:
        for i in (0, len(timeline.samples[host]) - 1):
            gpus = timeline.sample(host, i).gpus
            assert gpus and all(g.util_pct is not None and g.power_w is not None for g in gpus)
    assert len(Replay(timeline, history=8).timeline.ticks) > 10


@pytest.mark.parametrize("name", sorted(p.name for p in RESULTS.glob("*.watch.jsonl.gz")))
def test_the_published_watch_runs_convert_to_recordings_that_replay(tmp_path, name):
    """benchmarks/results' `watch --json` runs from real H200s (written before the memory clock was a metric) become
    recordings as the demo was made, and replay with every GPU figure they had."""
    out = tmp_path / "run.jsonl.gz"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_watch_recording.py"), str(out),
                           "--part", str(RESULTS / name), "h", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with gzip.open(RESULTS / name, "rt") as f:
        first = next(g for line in f for h in json.loads(line)["hosts"] for g in (h.get("gpus") or ()))
    timeline = Timeline.open(out)
    assert timeline.damage is None and timeline.gpu_columns == gpu_metrics.READINGS
    gpu = timeline.sample("h", 0).gpus[first["index"]]
    assert {n: getattr(gpu, n) for n in gpu_metrics.NAMES if n in first} == {n: v for n, v in first.items()
                                                                           if n in gpu_metrics.BY_NAME}
    assert gpu.mem_clock_mhz is None

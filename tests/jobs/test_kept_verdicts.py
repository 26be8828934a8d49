"""A kept verdict (verdict_reuse.verdict_unchanged: the precomputed clock deadline, the readings and facts of the
judgment) shows on every frame what judging every frame shows, through each clock of the engine:
the young-job window, the start-up age, the log's quiet time (confidence, stall_after) and the output
dir's last write. Each scenario is also run with one of those thresholds left out of the deadline
(`_offsets`): the comparison must then fail, so it would catch a cache that keeps a verdict too long.

Compared on every frame: phase, detail, since, confidence, advice, actions, and the evidence lines
with their numbers blanked (durations, rates and readings on a kept frame are as old as the
verdict, at most REJUDGE_EVERY_S: tests/jobs/test_rejudge.py)."""

from __future__ import annotations

import re

import pytest

from gpuwatch_tui.jobs import activity, judging, verdict_reuse
from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import DirStat, TailChunk

from .procs import LOG, gpu, proc, sample, torchrun_tree

HOST = "h1"


def _blank(evidence: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(re.sub(r"\d+(\.\d+)?(e[+-]\d+)?", "#", e) for e in evidence)


def _shown(tracker: JobTracker, t: float) -> tuple:
    return tuple((v.phase, v.detail, v.since, v.confidence, v.advice, v.actions, _blank(v.evidence))
                 for v in tracker.views(t))


def _tails(tracker: JobTracker, data: bytes, line: bytes, mtime: float | None = None) -> list[TailChunk]:
    return [TailChunk(k, LOG.path, line, False, len(data) - len(line), len(data), mtime, None)
            for k in tracker.wanted(HOST).tails]


def young_unread(tracker: JobTracker) -> list[tuple]:
    """A job whose log the probe never reports: `starting` while younger than YOUNG_S, then unknown."""
    shown = []
    for i in range(45):
        t = 1001.0 + i
        p = proc(101, 1, ["python", "train.py"], cpu=1.0 + 0.5 * i, start=1000.0)
        tracker.update(HOST, sample(t, {101: p}, [gpu(0, [101], 0.0, 119.0)]), now=t)
        shown.append(_shown(tracker, t))
    return shown


def unmatched_lines(tracker: JobTracker) -> list[tuple]:
    """Lines no rule knows, CPU busy, GPU idle: `starting` until the age passes stall_after."""
    shown, data = [], b""
    for i in range(60):
        t = 1001.0 + i
        p = proc(101, 1, ["python", "prep.py"], cpu=1.0 + 0.8 * i, start=1000.0)
        line = f"hello {i}\n".encode() if i % 6 == 0 else b""
        data += line
        tails = _tails(tracker, data, line) if line else []
        tracker.update(HOST, sample(t, {101: p}, [gpu(0, [101], 0.0, 119.0)], tails=tails), now=t)
        shown.append(_shown(tracker, t))
    return shown


def training_then_quiet(tracker: JobTracker) -> list[tuple]:
    """Progress lines each second, then none: the confidence drops once the log has been quiet
    min(60, stall_after / 2), the verdict turns silent past stall_after."""
    shown, data = [], b""
    for i in range(140):
        t = 1001.0 + i
        procs, gpus = torchrun_tree(cpu=10.0 + 2.0 * i)
        line = f"step {i + 1}/100000 loss {2.5 / (1 + i / 50):.4f} tokens/s 99000\n".encode() if i < 25 else b""
        data += line
        tails = _tails(tracker, data, line) if line else []
        tracker.update(HOST, sample(t, procs, gpus, tails=tails), now=t)
        shown.append(_shown(tracker, t))
    return shown


def checkpoint_then_stall(tracker: JobTracker) -> list[tuple]:
    """A quiet log, CPU and GPU idle, the output dir written at t=1040: checkpointing until
    stall_after has passed since that write, then stalled."""
    shown = []
    for i in range(110):
        t = 1001.0 + i
        p = proc(101, 1, ["python", "-u", "save.py"], cpu=5.0, start=1000.0, unbuffered=True)
        tails = _tails(tracker, b"x\n", b"x\n") if i == 1 else []
        dirs = [DirStat(k, path, True, 3, 1 << 20, 1040.0 if t >= 1040 else 990.0, "ckpt.pt")
                for k, path in tracker.wanted(HOST).dirs.items()]
        tracker.update(HOST, sample(t, {101: p}, [gpu(0, [101], 0.0, 119.0)], tails=tails, dirs=dirs,
                                    matches={"cfg0": [101]}), now=t)
        shown.append(_shown(tracker, t))
    return shown


def rhythm_then_hang(tracker: JobTracker) -> list[tuple]:
    """A step every 20 s (8 of them: the job's own rhythm), CPU flat and the GPU held idle, then no line:
    training until the log has been quiet 5 x 20 s (jobs/cadence.py), then stalled, long before stall_after."""
    shown, data = [], b""
    for i in range(270):
        t = 1001.0 + i
        p = proc(101, 1, ["python", "-u", "train.py"], cpu=5.0, start=1000.0, unbuffered=True)
        line = f"step {i // 20 + 1}/100000 loss 0.5\n".encode() if i % 20 == 0 and i < 160 else b""
        data += line
        tails = _tails(tracker, data, line) if line else []
        tracker.update(HOST, sample(t, {101: p}, [gpu(0, [101], 0.0, 119.0)], tails=tails), now=t)
        shown.append(_shown(tracker, t))
    return shown


SCENARIOS = {
    # name: (run, settings, the threshold the verdict changes at: left out of _offsets, it must show)
    "young_unread": (young_unread, JobSettings(stall_after_s=300), lambda stall: activity.YOUNG_S),
    "unmatched_lines": (unmatched_lines, JobSettings(stall_after_s=40), lambda stall: stall),
    "training_then_quiet": (training_then_quiet, JobSettings(stall_after_s=100), lambda stall: min(60.0, stall / 2)),
    "checkpoint_then_stall": (
        checkpoint_then_stall,
        JobSettings(jobs=(JobSpec("save", HOST, match="save.py", output_dir="/work/out", stall_after_s=30),)),
        lambda stall: stall),
    "rhythm_then_hang": (rhythm_then_hang, JobSettings(stall_after_s=300), lambda stall: 100.0),
}


def _judged_every_frame(monkeypatch, run, settings) -> list[tuple]:
    with monkeypatch.context() as m:
        m.setattr(verdict_reuse, "REJUDGE_EVERY_S", 0.0)
        return run(JobTracker(settings))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kept_verdicts_show_what_judging_every_frame_shows(monkeypatch, judged_at, name):
    run, settings, _ = SCENARIOS[name]
    kept = run(JobTracker(settings))
    kept_judgments = len(judged_at)
    every = _judged_every_frame(monkeypatch, run, settings)
    for i, (a, b) in enumerate(zip(kept, every)):
        assert a == b, (name, i, a, b)
    assert len({p for frame in every for p, *_ in frame}) >= 2 or name == "training_then_quiet", every[-1]
    assert kept_judgments < 0.6 * len(kept), (kept_judgments, len(kept))  # the kept path did keep


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_deadline_without_the_threshold_shows_a_stale_verdict(monkeypatch, name):
    """The same scenario with the threshold its verdict turns at left out of the kept verdict's
    deadline: some frame then differs from judging every frame (the test above has teeth)."""
    run, settings, threshold = SCENARIOS[name]
    real = verdict_reuse._offsets

    def without(stall_after: float, quiet_limit: float | None = None) -> tuple[float, ...]:
        return tuple(o for o in real(stall_after, quiet_limit) if o != threshold(stall_after))

    every = _judged_every_frame(monkeypatch, run, settings)
    monkeypatch.setattr(verdict_reuse, "_offsets", without)
    kept = run(JobTracker(settings))
    assert any(a != b for a, b in zip(kept, every)), name


def test_the_scenarios_reach_the_verdicts_they_are_about(monkeypatch):
    phases = {}
    for name, (run, settings, _) in SCENARIOS.items():
        every = _judged_every_frame(monkeypatch, run, settings)
        phases[name] = [(frame[0][0], frame[0][3]) for frame in every if frame]
    assert {p for p, _ in phases["young_unread"]} >= {"starting", "unknown"}, phases["young_unread"]
    assert {p for p, _ in phases["unmatched_lines"]} >= {"starting", "unknown"}, phases["unmatched_lines"]
    quiet = phases["training_then_quiet"]
    assert ("training", 0.9) in quiet and ("training", 0.7) in quiet and quiet[-1][0] == "silent", quiet
    assert {p for p, _ in phases["checkpoint_then_stall"]} >= {"checkpointing", "stalled"}, \
        phases["checkpoint_then_stall"]
    hang = phases["rhythm_then_hang"]
    assert hang[0][0] in ("starting", "training") and ("training", 0.9) in hang and hang[-1][0] == "stalled", hang

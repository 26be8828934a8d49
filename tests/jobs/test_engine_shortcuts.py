"""The phase engine's shortcuts answer as the plain computation does: the window of samples found by
bisection (activity._recent, _activity), the kept progress text (activity.progress_evidence, updated in place
between calls), the kept verdict's refreshed evidence lines (verdict_reuse._refresh_log_lines)."""

from __future__ import annotations

import dataclasses
import random
from collections import deque

from gpuwatch_tui.jobs import activity, phase, verdict_reuse
from gpuwatch_tui.jobs.observation import GpuReading, ResourceSample
from gpuwatch_tui.jobs.progress import Progress, ProgressTracker
from gpuwatch_tui.jobs.rules import RuleSet


def _recent_walked(samples, since):
    out = []
    for s in reversed(samples):
        if s.time < since:
            break
        out.append(s)
    out.reverse()
    return out


def _samples(rng: random.Random, n: int) -> deque:
    t = 1_796_000_000.0 + rng.uniform(0, 100)
    out = deque()
    for _ in range(n):
        t += rng.choice([1.0, 1.0, 0.5, 10.0, 3.0])
        compilers = ("cc1plus",) if rng.random() < 0.1 else ()
        gpus = (GpuReading(0, rng.uniform(0, 100), 4000.0, rng.uniform(80, 700), 700.0),)
        out.append(ResourceSample(t, rng.uniform(0, 1000), 1.0, gpus, ("R",), compilers, 0, ((1, 1.0),), 10, (1,)))
    return out


def test_windows_by_bisection_are_the_walked_windows():
    rng = random.Random(3)
    for _ in range(150):
        samples = _samples(rng, rng.randint(1, 80))
        last = samples[-1].time
        for since in (last - 30, last - 0.5, last + 1, samples[0].time, samples[0].time - 5, last - rng.uniform(0, 90)):
            assert activity._recent(samples, since) == _recent_walked(samples, since)
            assert activity._recent(list(samples), since) == _recent_walked(samples, since)
        now = last + rng.choice([0.0, 0.5, 20.0, 40.0])
        act = activity.measure_activity(samples, now)
        seen = [c for s in _recent_walked(samples, now - activity.COMPILE_RECENT_S) for c in s.compilers]
        assert act.compilers_recent == tuple(dict.fromkeys(seen))
        window = _recent_walked(samples, now - activity.RATE_WINDOW_S) or [samples[-1]]
        assert act.gpu_util_min == {0: min(s.gpus[0].util_pct for s in window)}
        # Another window than the compile one: the compile scan finds its own start.
        other = activity.measure_activity(samples, now, window=12.0)
        assert other.compilers_recent == act.compilers_recent and other.compilers_last_at == act.compilers_last_at


def test_kept_progress_text_follows_a_progress_updated_in_place():
    tracker = ProgressTracker()
    rules = RuleSet.with_user_rules()
    texts = []
    for i in range(1, 30):
        m = rules.match(f"step {i}/1000 loss {3.0 / i:.4f} tokens/s {90000 + 13 * i}")
        tracker.update(m.progress, 1000.0 + i)
        p = tracker.current  # the same object, updated in place
        first = activity.progress_evidence(p)
        again = activity.progress_evidence(p)
        fresh = activity.progress_evidence(dataclasses.replace(p))  # another object: made anew
        assert first == again == fresh, (i, first, fresh)
        assert again is first  # the kept text
        assert activity.progress_evidence(p, with_eta=False) == activity.progress_evidence(
            dataclasses.replace(p), with_eta=False)
        texts.append(first)
    assert len(set(texts)) == len(texts)  # every update shows (a text kept by identity alone would not)
    assert activity.progress_evidence(Progress()) is None


def test_per_frame_records_compare_and_hash_by_value_without_an_instance_dict():
    """The samples, readings and verdicts made on every frame are slotted (no __dict__ per instance:
    a job keeps up to WINDOW_S samples) and compare and hash by value as the frozen records did."""
    from gpuwatch_tui.jobs.hysteresis import Memory
    from gpuwatch_tui.jobs.phase import Verdict

    g = GpuReading(0, 99.0, 4000.0, 690.0, 700.0)
    a = ResourceSample(1.0, 2.0, 0.0, (g,), ("R",), (), 0, ((1, 2.0),), 10, (1,))
    b = ResourceSample(1.0, 2.0, 0.0, (GpuReading(0, 99.0, 4000.0, 690.0, 700.0),), ("R",), (), 0, ((1, 2.0),), 10, (1,))
    assert a == b and hash(a) == hash(b) and a != dataclasses.replace(a, cpu_s=3.0)
    v = Verdict("training", 5.0, 0.9, None, ("log: step 1",), "", (), Memory(known=True))
    w = Verdict("training", 5.0, 0.9, None, ("log: step 1",), "", ())  # the memory is not compared
    assert v == w and hash(v) == hash(w)
    for record in (g, a, v, Memory()):
        assert not hasattr(record, "__dict__"), type(record)

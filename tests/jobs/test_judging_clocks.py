"""The clock checks of a kept verdict (judging._next_deadline, _clock_crossed) bisect the engine's
sorted thresholds; they answer exactly as a test of every threshold does, boundaries included."""

from __future__ import annotations

import random

from gpuwatch_tui.jobs import judging


def _deadline_every_threshold(bases, stall_after, since, now):
    for base in bases:
        if base > since:
            return True
        for off in judging._offsets(stall_after):
            if since < base + off <= now:
                return True
    return False


def _crossed_every_threshold(before, after, stall_after, then, now):
    if len(before) != len(after):
        return True
    for old, new in zip(before, after):
        if new > now:
            return True
        for off in judging._offsets(stall_after):
            if (then - old >= off) != (now - new >= off):
                return True
    return False


def test_bisected_clock_checks_answer_as_testing_every_threshold():
    rng = random.Random(7)
    t0 = 1_796_120_535.12  # a real epoch time: rounding at this magnitude is what matters
    checked = passed = crossed = early = 0
    for _ in range(5000):
        stall = rng.choice([4.0, 20.0, 60.0, 300.0, 1200.0, 7.3])
        offsets = judging._offsets(stall)
        since = t0 + rng.uniform(0, 2000)
        now = since + rng.choice([0.0, 0.5, 1.0, 5.0, rng.uniform(0, 100)])
        bases = []
        for _ in range(rng.randint(0, 5)):
            off = rng.choice(offsets)
            # Bases on a boundary (base + off == since or == now), near one, or anywhere before.
            base = rng.choice([since - off, now - off, since - off + 1e-7, now - off - 1e-7,
                               since - rng.uniform(0, 3000), since + 0.1 * rng.random()])
            bases.append(base)
        want = _deadline_every_threshold(bases, stall, since, now)
        deadline = judging._next_deadline(tuple(bases), stall, since)
        # Passed: judged (now >= the deadline). Never late; early by at most the clock noise.
        if want:
            assert now >= deadline, (bases, stall, since, now)
        elif now >= deadline:
            early += 1
            assert _deadline_every_threshold(bases, stall, since, now + judging.CLOCK_NOISE_S + 1e-9)
        passed += want
        after = tuple(b + rng.choice([0.0, 1.0, now - since, rng.uniform(0, 5)]) for b in bases)
        want = _crossed_every_threshold(tuple(bases), after, stall, since, now)
        assert judging._clock_crossed(tuple(bases), after, stall, since, now) == want
        crossed += want
        checked += 1
    assert checked == 5000 and 250 < passed < 4750 and 250 < crossed < 4750, (passed, crossed)
    assert early < 0.1 * checked, early


def test_offsets_are_the_thresholds_the_engine_compares_durations_with():
    # age < min(stall, YOUNG_S) and < stall; quiet < min(60, stall / 2), >= 60 and < stall; output < stall
    assert judging._offsets(300.0) == (0.0, 30.0, 60.0, 300.0)
    assert judging._offsets(20.0) == (0.0, 10.0, 20.0, 60.0)

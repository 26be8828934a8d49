"""The clock checks of a kept verdict (verdict_reuse._next_deadline, _clock_crossed) bisect the engine's
sorted thresholds; they answer exactly as a test of every threshold does, boundaries included."""

from __future__ import annotations

import random

from gpuwatch_tui.jobs import activity, judging, verdict_reuse


def _deadline_every_threshold(bases, stall_after, since, now):
    for base in bases:
        if base > since:
            return True
        for off in verdict_reuse._offsets(stall_after):
            if since < base + off <= now:
                return True
    return False


def _crossed_every_threshold(before, after, stall_after, then, now):
    if len(before) != len(after):
        return True
    for old, new in zip(before, after):
        if new > now:
            return True
        for off in verdict_reuse._offsets(stall_after):
            if (then - old >= off) != (now - new >= off):
                return True
    return False


def test_bisected_clock_checks_answer_as_testing_every_threshold():
    rng = random.Random(7)
    t0 = 1_796_120_535.12  # a real epoch time: rounding at this magnitude is what matters
    checked = passed = crossed = early = 0
    for _ in range(5000):
        stall = rng.choice([4.0, 20.0, 60.0, 300.0, 1200.0, 7.3])
        offsets = verdict_reuse._offsets(stall)
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
        deadline = verdict_reuse._next_deadline(tuple(bases), stall, since)
        # Passed: judged (now >= the deadline). Never late; early by at most the clock noise.
        if want:
            assert now >= deadline, (bases, stall, since, now)
        elif now >= deadline:
            early += 1
            assert _deadline_every_threshold(bases, stall, since, now + verdict_reuse.CLOCK_NOISE_S + 1e-9)
        passed += want
        after = tuple(b + rng.choice([0.0, 1.0, now - since, rng.uniform(0, 5)]) for b in bases)
        want = _crossed_every_threshold(tuple(bases), after, stall, since, now)
        assert verdict_reuse._clock_crossed(tuple(bases), after, stall, since, now) == want
        crossed += want
        checked += 1
    assert checked == 5000 and 250 < passed < 4750 and 250 < crossed < 4750, (passed, crossed)
    assert early < 0.1 * checked, early


def test_offsets_are_the_thresholds_the_engine_compares_durations_with():
    # age < min(stall, YOUNG_S) and < stall; quiet < min(60, stall / 2), >= 60 and < stall; output < stall
    assert verdict_reuse._offsets(300.0) == (0.0, 30.0, 60.0, 300.0)
    assert verdict_reuse._offsets(20.0) == (0.0, 10.0, 20.0, 60.0)


def _close_every_edge(a, b) -> bool:
    """`_gpus_close` as a test of every edge of every reading (what the bands stand for)."""
    if len(a) != len(b):
        return False
    for ga, gb in zip(a, b):
        if ga is gb:
            continue
        if ga.index != gb.index:
            return False
        for x, y, noise, edges in ((ga.util_pct, gb.util_pct, verdict_reuse.GPU_UTIL_NOISE, verdict_reuse.GPU_UTIL_EDGES),
                                   (ga.power_fraction, gb.power_fraction, verdict_reuse.GPU_POWER_NOISE,
                                    verdict_reuse.GPU_POWER_EDGES)):
            if (x is None) != (y is None):
                return False
            if x is not None and (abs(x - y) > noise or any((x < e) != (y < e) for e in edges)):
                return False
        ma, mb = ga.mem_used_mib, gb.mem_used_mib
        if (ma is None) != (mb is None) or (ma is not None and abs(ma - mb) > verdict_reuse.GPU_MEM_NOISE_MIB):
            return False
    return True


def test_gpu_bands_answer_as_testing_every_edge():
    """The kept readings' bands (verdict_reuse._gpu_bands) answer as the edges do, on them, next to them,
    for missing and NaN readings."""
    from gpuwatch_tui.jobs.observation import GpuReading

    rng = random.Random(11)
    limit = 700.0
    utils = [*verdict_reuse.GPU_UTIL_EDGES, *(e + d for e in verdict_reuse.GPU_UTIL_EDGES for d in (-3.0, -1e-9, 1e-9, 3.0)),
             0.0, 50.0, 100.0, None, float("nan")]
    powers = [*(f * limit for f in verdict_reuse.GPU_POWER_EDGES), 119.0, 690.0, None, float("nan"),
              *(f * limit + d for f in verdict_reuse.GPU_POWER_EDGES for d in (-14.0, -1e-7, 1e-7, 14.0))]
    close = spun = 0
    for _ in range(4000):
        n = rng.randint(1, 3)
        a = tuple(GpuReading(i, rng.choice(utils), rng.choice([80_000.0, None]), rng.choice(powers), limit)
                  for i in range(n))
        b = []
        for g in a:
            u = g.util_pct if rng.random() < 0.5 else rng.choice(utils)
            p = g.power_w if rng.random() < 0.5 else rng.choice(powers)
            m = g.mem_used_mib if rng.random() < 0.7 else rng.choice([80_000.0, 80_100.0, None])
            b.append(g if rng.random() < 0.1 else GpuReading(g.index, u, m, p, limit))
        b = tuple(b)
        want = _close_every_edge(a, b)
        assert verdict_reuse._gpus_close(verdict_reuse._gpu_bands(a), b) == want, (a, b)
        # no_spin: also not close where a reading could be spinning (spin util, below working power)
        spin = any(g.util_pct is not None and g.util_pct >= activity.GPU_SPIN_UTIL - verdict_reuse.GPU_UTIL_NOISE
                   and (g.power_fraction is None
                        or g.power_fraction < activity.GPU_WORKING_POWER_FRACTION + verdict_reuse.GPU_POWER_NOISE)
                   for g in b)
        assert verdict_reuse._gpus_close(verdict_reuse._gpu_bands(a), b, no_spin=True) == (want and not spin), (a, b)
        spun += spin
        close += want
    assert 200 < close < 3800 and 200 < spun < 3800, (close, spun)

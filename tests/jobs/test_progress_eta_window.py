"""The step-history ETA finds its 10-minute window by bisection: same as filtering every point."""

from __future__ import annotations

import random

from gpuwatch_tui.jobs.progress import ProgressPoint, ProgressTracker


def eta_by_filtering(tracker: ProgressTracker, now: float) -> float | None:
    points = [p for p in tracker.history if p.step is not None and now - p.time <= 600]
    if len(points) >= 2 and points[-1].step > points[0].step and points[-1].time > points[0].time:
        per_s = (points[-1].step - points[0].step) / (points[-1].time - points[0].time)
        return (tracker.current.total - tracker.current.step) / per_s
    return None


def test_eta_window_matches_filtering_every_point():
    rng = random.Random(7)
    for _ in range(400):
        tracker, t = ProgressTracker(), 0.0
        for k in range(rng.randint(0, 300)):
            t += rng.choice([0.5, 3.0, 40.0, 200.0])
            step = rng.choice([None, k, k, k, 5])  # gaps, and a step that goes back
            tracker.history.append(ProgressPoint(t, step, 1e6, None, None, None))
        tracker.current.step, tracker.current.total = 10.0, 1e6
        now = t + rng.choice([0.0, 100.0, 700.0])
        want, got = eta_by_filtering(tracker, now), tracker._estimate_eta(now, False)
        assert (got is None) == (want is None)
        if want is not None:
            assert abs(got - want) <= 1e-9 * abs(want)

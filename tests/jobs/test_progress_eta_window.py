"""The step-history ETA finds its 10-minute window by bisection: same as filtering every point. Lines read
in one go (a backlog) share one time and start the window at the last of them."""

from __future__ import annotations

import random

from gpuwatch_tui.jobs.progress import ProgressPoint, ProgressTracker


def eta_by_filtering(tracker: ProgressTracker, now: float) -> float | None:
    points = [p for p in tracker.history if p.step is not None and now - p.time <= 600]
    # points read together (one time) count from the last of them
    points = [p for p in points if p.time != points[0].time or p is [q for q in points if q.time == p.time][-1]]
    if len(points) >= 2 and points[-1].step > points[0].step and points[-1].time > points[0].time:
        per_s = (points[-1].step - points[0].step) / (points[-1].time - points[0].time)
        return (tracker.current.total - tracker.current.step) / per_s
    return None


def test_eta_window_matches_filtering_every_point():
    rng = random.Random(7)
    for _ in range(400):
        tracker, t = ProgressTracker(), 0.0
        for k in range(rng.randint(0, 300)):
            t += rng.choice([0.0, 0.0, 0.5, 3.0, 40.0, 200.0])  # 0: lines read in one go
            step = rng.choice([None, k, k, k, 5])  # gaps, and a step that goes back
            tracker.history.append(ProgressPoint(t, step, 1e6, None, None, None))
        tracker.current.step, tracker.current.total = 10.0, 1e6
        now = t + rng.choice([0.0, 100.0, 700.0])
        want, got = eta_by_filtering(tracker, now), tracker._estimate_eta(now, False)
        assert (got is None) == (want is None)
        if want is not None:
            assert abs(got - want) <= 1e-9 * abs(want)


def test_a_backlog_read_at_once_does_not_make_the_first_eta_fast():
    """A job watched from its step 10 at one step a second: its first ten lines come in one read. The ETA
    from the next line on is the live rate's (990 s left), not ten steps in one second's (99 s)."""
    tracker = ProgressTracker()
    for step in range(1, 11):
        tracker.history.append(ProgressPoint(100.0, step, 1000, None, None, None))
    tracker.current.step, tracker.current.total = 10, 1000
    assert tracker._estimate_eta(100.0, False) is None  # nothing live yet: no rate
    for k, step in enumerate(range(11, 14), start=1):
        tracker.history.append(ProgressPoint(100.0 + k, step, 1000, None, None, None))
        tracker.current.step = step
        assert abs(tracker._estimate_eta(100.0 + k, False) - (1000 - step)) < 1e-6

"""What a long-watched job keeps is bounded by what is read: resource samples (every one of the last
minute, older ones one per 10 s) and the step history (a view's last points, the ETA's 10 minutes)."""

from __future__ import annotations

from gpuwatch_tui.jobs.job_state import JobState
from gpuwatch_tui.jobs.judging import DENSE_S, SPARSE_EVERY_S, WINDOW_S, _thin
from gpuwatch_tui.jobs.observation import ResourceSample
from gpuwatch_tui.jobs.progress import DENSE_POINTS, ETA_WINDOW_S, SPARSE_POINT_S, ProgressTracker


def test_resource_samples_are_dense_for_a_minute_then_sparse():
    job = JobState("j", "h", "n", 1)
    t = 0.0
    for i in range(3000):
        t += 0.5 if i % 7 == 0 else 1.0  # a frame a second, some sooner
        job.samples.append(ResourceSample(time=t, cpu_s=float(i)))
        while now_minus_first(job, t) > WINDOW_S:
            job.samples.popleft()
        _thin(job, t)
        if i < 5:
            assert len(job.samples) == i + 1  # nothing old to thin yet
    times = [s.time for s in job.samples]
    dense = [x for x in times if x >= t - DENSE_S]
    assert len(dense) >= DENSE_S - 1  # the last minute whole
    old = [x for x in times if x < t - DENSE_S]
    assert all(b - a >= SPARSE_EVERY_S for a, b in zip(old, old[1:]))
    assert t - times[0] > WINDOW_S - SPARSE_EVERY_S  # the window still reaches back 15 minutes
    assert len(times) < DENSE_S * 1.2 + WINDOW_S / SPARSE_EVERY_S


def now_minus_first(job: JobState, now: float) -> float:
    return now - job.samples[0].time


def test_step_history_keeps_the_last_points_and_the_eta_window_only():
    full, kept = ProgressTracker(max_history=100_000), ProgressTracker()
    full._thin = lambda now: None  # every point kept: the reference
    t = 0.0
    for step in range(1, 4000):
        t += 1.0
        fields = {"step": str(step), "total": "100000", "loss": f"{2.0 - step * 1e-4:.4f}"}
        kept.update(fields, t)
        full.update(dict(fields), t)
    points = list(kept.history)
    assert len(points) <= DENSE_POINTS + ETA_WINDOW_S / SPARSE_POINT_S + 1
    assert [p.step for p in points[-DENSE_POINTS:]] == list(range(4000 - DENSE_POINTS, 4000))
    assert t - points[0].time <= ETA_WINDOW_S
    # The ETA read from the thinned history is the full history's within a few seconds of rate window.
    kept.current.rate = full.current.rate = None
    a, b = kept._estimate_eta(t, False), full._estimate_eta(t, False)
    assert a is not None and abs(a - b) <= 0.02 * b
    assert len(full.history) == 3999

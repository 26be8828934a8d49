"""What a kept verdict carries from frame to frame answers as making it afresh does: the CPU rate
window's first sample found from the last frame's place (verdict_reuse._cpu_class) and the log-moved
evidence lines made again only where their input moved (verdict_reuse._refresh_log_lines: a new hint, an
age past the span its text holds for, new progress values)."""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections import deque

from gpuwatch_tui.jobs import activity, judging, verdict_reuse
from gpuwatch_tui.jobs.job_state import JobState
from gpuwatch_tui.jobs.observation import ResourceSample
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker

from .test_progress_only import run as progress_run


def _class_by_bisection(samples) -> int:
    """verdict_reuse._cpu_class as it was: the window's start found by bisection on every frame."""
    if len(samples) < 2:
        return -1
    last = samples[-1]
    i = bisect_left([s.time for s in samples], last.time - activity.RATE_WINDOW_S)
    first = samples[i] if len(samples) - i >= 2 else samples[-2]
    span = last.time - first.time
    if span <= 0:
        return -1
    cores = (max(0.0, last.cpu_s - first.cpu_s) + max(0.0, last.children_cpu_s - first.children_cpu_s)) / span
    return 0 if cores < activity.CPU_FLAT_CORES else 2 if cores >= activity.CPU_BUSY_CORES else 1


def test_cpu_class_from_the_carried_window_start_is_the_bisected_one():
    """Frames at 1 Hz, with gaps, bursts, a window that empties and samples dropped at the old end
    (the window's popleft and thinning): every frame's class equals the bisection's."""
    rng = random.Random(5)
    classes = set()
    for _ in range(60):
        job = JobState("j", "h", "j", 1)
        t, cpu = 1000.0, 10.0
        for _ in range(rng.randint(1, 150)):
            t += rng.choice([1.0, 1.0, 1.0, 0.5, 2.0, 7.0, 31.0])
            cpu += rng.choice([0.0, 0.05, 0.5, 1.0, 3.0])
            job.samples.append(ResourceSample(t, cpu, rng.choice([0.0, 0.2])))
            while len(job.samples) > 3 and rng.random() < 0.3:
                del job.samples[rng.randrange(len(job.samples) - 2)]  # thinned or aged out
            want = _class_by_bisection(job.samples)
            assert verdict_reuse._cpu_class(job) == want, list(job.samples)
            classes.add(want)
    assert classes == {-1, 0, 1, 2}, classes


def test_refreshed_log_lines_are_the_fresh_ones_at_every_age():
    """A kept training verdict's log lines refreshed at later times (the last line's age crossing
    its text's spans: seconds, minutes, hours, days) equal `_log_lines` made afresh, in the places of
    the old ones in the evidence, without repeats; and on the progress-only frames before."""
    tracker = JobTracker(JobSettings(stall_after_s=20))
    progress_run(tracker, b"", [])
    [job] = tracker.states("gpu1")
    kept = job.judged
    t = job.samples[-1].time
    log = job.primary_log
    log.last_growth = t - 5.0  # lines long ago: the age now reads the time since
    verdict_reuse.keep_log_lines(job, kept, verdict_reuse.kept_log_lines(job, t), t)
    job.verdict = judging.Verdict(job.verdict.phase, job.verdict.since, job.verdict.confidence, job.verdict.detail,
                                  (*job.verdict.evidence[:1], *kept.lines), job.verdict.advice)
    ages = set()
    for dt in (0.0, 0.3, 0.99, 1.0, 1.5, 59.9, 60.0, 61.2, 119.0, 3599.5, 3600.0, 3660.0, 86399.0, 86400.0, 90000.0):
        now = t + dt
        if dt == 3599.5:  # a warning put first in the verdict's evidence (as match_check does): lines move
            v = job.verdict
            job.verdict = judging.Verdict(v.phase, v.since, v.confidence, v.detail, ("match warning", *v.evidence),
                                          v.advice)
        before, old = job.verdict.evidence, kept.lines
        verdict_reuse._refresh_log_lines(job, kept, now)
        fresh = verdict_reuse.kept_log_lines(job, now)
        assert kept.lines == fresh, (dt, kept.lines, fresh)
        evidence = job.verdict.evidence
        assert len(set(evidence)) == len(evidence) and all(line in evidence for line in fresh), evidence
        assert [e for e in evidence if e not in fresh] == [e for e in before if e not in old]  # the others kept
        assert [evidence.index(line) for line in fresh] == [before.index(line) for line in old]  # in their places
        ages.add(fresh[1])
    assert len(ages) >= 10, ages  # the age line did move


def test_progress_only_frames_keep_the_lines_judging_makes(monkeypatch):
    """On every progress-only frame the kept lines are those `_log_lines` makes on that frame."""
    checked = []
    real = verdict_reuse._refresh_log_lines

    def refresh(job, kept, now):
        real(job, kept, now)
        assert kept.lines == verdict_reuse.kept_log_lines(job, now), now
        assert all(line in job.verdict.evidence for line in kept.lines)
        checked.append(now)

    monkeypatch.setattr(verdict_reuse, "_refresh_log_lines", refresh)
    progress_run(JobTracker(JobSettings(stall_after_s=20)), b"", [])
    assert len(checked) > 20


def _thin_by_bisection(samples, upto: float, now: float) -> float:
    """judging._thin as it was: both ends of the part to thin found by bisection on every frame."""
    times = [s.time for s in samples]
    if times[0] >= now - judging.DENSE_S:
        return upto
    last = min(bisect_left(times, now - judging.DENSE_S) - 1, len(samples) - 3)
    k = max(bisect_right(times, upto), 1)
    while k <= last:
        if samples[k].time - samples[k - 1].time < judging.SPARSE_EVERY_S:
            del samples[k]
            last -= 1
        else:
            k += 1
    return max(upto, samples[last].time) if last >= 0 else upto


def test_thinning_from_the_carried_places_keeps_the_samples_bisection_keeps():
    """Long runs at 1 Hz with gaps and bursts, the window's oldest samples aging out: after every frame
    the samples kept are the ones the bisecting thinning keeps."""
    rng = random.Random(9)
    for _ in range(12):
        job = JobState("j", "h", "j", 1)
        ref: deque = deque()
        upto = float("-inf")
        t = 1000.0
        for _ in range(rng.randint(50, 1300)):
            t += rng.choice([1.0, 1.0, 1.0, 1.0, 0.5, 3.0, 12.0, 70.0])
            for samples in (job.samples, ref):
                samples.append(ResourceSample(t, 1.0))
                while t - samples[0].time > judging.WINDOW_S:
                    samples.popleft()
            judging._thin(job, t)
            upto = _thin_by_bisection(ref, upto, t)
            assert [s.time for s in job.samples] == [s.time for s in ref]
            assert job.sparse_upto == upto

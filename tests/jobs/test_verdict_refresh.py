"""A training verdict judged again only for its age (judging._refresh: every fact the engine decides on
where it was at the last judgment) has only its evidence values made again. Every such judgment here
is checked against the whole engine run on the same frame (infer_phase on a fresh observation, with
the verdict before it): the same verdict, evidence, since, confidence and hysteresis memory.

Fed through the tracker: GPU readings, CPU rates and log line counts recorded on a real 2x H200
machine (tests/data/gpu_runs, the log lines in the jobs' own formats), and the steady-training and
quiet-log scenarios of the kept-verdict tests."""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs import judging
from gpuwatch_tui.jobs.phase import infer_phase
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import FdTarget, GpuProcess, GpuSample, TailChunk

from .procs import proc, sample
from .test_h200_runs import DATA, T0, flex_line, hang_line
from .test_kept_verdicts import training_then_quiet
from .test_progress_only import run as progress_run

HOST = "h1"


@pytest.fixture
def refreshes(monkeypatch) -> list:
    """Runs the whole engine beside every refreshed judgment and compares; lists (time, verdict)."""
    seen: list = []
    real_judge, real_refresh = judging.judge, judging._refresh
    taken: list = []

    def refresh(job, kept, now):
        done = real_refresh(job, kept, now)
        taken.append(done)
        return done

    def judge(job, now, skew, looked=True):
        before = job.verdict
        taken.clear()
        real_judge(job, now, skew, looked)
        if taken and taken[-1]:
            full = infer_phase(judging.observation(job, skew), now, before)
            assert job.verdict == full, (now, job.verdict, full)
            assert job.verdict.memory == full.memory, now
            seen.append((now, job.verdict))

    monkeypatch.setattr(judging, "_refresh", refresh)
    monkeypatch.setattr(judging, "judge", judge)
    return seen


def recorded_window(tracker: JobTracker, name: str, line) -> list:
    """One recorded H200 window through the tracker: a `python -u` process writing its log, its GPU
    (util, memory, power as read each second), its CPU time from the recorded rates, new lines as
    the recorded line count grows. The phases shown, one per frame."""
    w = DATA["windows"][name]
    log = w["log"]
    cpu = kids = 0.0
    rate = (0.0, 0.0)
    prev_t = None
    lines, data = 0, b""
    shown = []
    for s in w["samples"]:
        t = T0 + s["t"]
        if s["cpu_cores"] is not None:
            rate = (s["cpu_cores"], s["child_cores"] or 0.0)
        if prev_t is not None:
            cpu += rate[0] * (t - prev_t)
            kids += rate[1] * (t - prev_t)
        prev_t = t
        new = b""
        while lines < s["log_lines"]:
            lines += 1
            new += (line(lines) + "\n").encode()
        data += new
        out = FdTarget(log, "file", append=False, size=len(data))
        p = proc(101, 1, ["python", "-u", w["job"]], cpu=cpu, kids_cpu=kids, stdout=out, unbuffered=True,
                 start=T0 + w["started_at"] - 0.101)
        gpus = [GpuSample(g[0], f"GPU-{g[0]}", "NVIDIA H200", g[1], g[2], 143_771.0, 40.0, g[3], g[4], 1980.0,
                          processes=(GpuProcess(101, g[2]),)) for g in s["gpus"]]
        tails = [TailChunk(k, log, new, False, len(data) - len(new), len(data), t, None)
                 for k in tracker.wanted(HOST).tails] if new else []
        tracker.update(HOST, sample(t, {101: p}, gpus, tails=tails), now=t)
        shown.append(tracker.views(t)[0].phase)
    return shown


@pytest.mark.parametrize("name,line", [("hang", hang_line), ("flex_compile", flex_line)])
def test_refreshed_judgments_on_recorded_h200_readings_equal_the_whole_engine(refreshes, name, line):
    shown = recorded_window(JobTracker(JobSettings(stall_after_s=DATA["windows"][name]["stall_after_s"])),
                            name, line)
    assert "training" in shown
    assert refreshes, shown  # the comparison above ran on real readings


def test_refreshed_judgments_of_steady_training_and_a_quiet_log_equal_the_whole_engine(refreshes):
    progress_run(JobTracker(JobSettings(stall_after_s=20)), b"", [])  # progress lines, then quiet
    steady = len(refreshes)
    assert steady >= 4
    training_then_quiet(JobTracker(JobSettings(stall_after_s=60)))
    assert len(refreshes) >= steady + 4
    # Some refreshes were of frames without new lines (the log quiet, not yet past its threshold).
    assert any(v.evidence[1].startswith("last log line") and not v.evidence[1].startswith("last log line 0s")
               for _, v in refreshes)


"""A frame that changes nothing the engine reads keeps the job's verdict (verdict_reuse.verdict_unchanged): the
verdicts shown are those of judging every frame, timers included (a log going quiet past stall_after
flips the verdict on the first frame past it, not at the next refresh)."""

from __future__ import annotations

from gpuwatch_tui.jobs import judging, verdict_reuse
from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import TailChunk

from .procs import LOG, gpu, proc, sample, torchrun_tree


def tail(key, data):
    return TailChunk(key, LOG.path, data, False, 0, None, None, None)


def quiet_cpu_job(tracker: JobTracker, frames: int) -> list[tuple[float, str, str | None, float]]:
    """A configured job that logs one line at t=1, then nothing; CPU flat. (t, phase, detail, since)."""
    shown = []
    for i in range(frames):
        t = float(i)
        p = proc(300, 1, ["python", "-u", "hang.py"], cpu=3.0, unbuffered=True, start=0.0)
        chunks = [tail(k, b"step 3/100 loss 1.0\n") for k in tracker.wanted("cpu1").tails] if i == 1 else []
        tracker.update("cpu1", sample(t, {300: p}, [], tails=chunks, matches={"cfg0": [300]}), now=t)
        [job] = tracker.views(t)
        shown.append((t, job.phase, job.detail, job.since))
    return shown


def settings() -> JobSettings:
    # 32 s: the verdict flips at t=33, between two of the 5 s refreshes (judged at 1, 6, ... 31, 36).
    return JobSettings(jobs=(JobSpec("hang", "cpu1", match="hang.py", stall_after_s=32),))


def test_a_kept_verdict_flips_on_the_first_frame_past_stall_after(monkeypatch, judged_at):
    kept = JobTracker(settings())
    shown = quiet_cpu_job(kept, 45)
    mine = list(judged_at)  # the kept tracker's judgments only
    monkeypatch.setattr(verdict_reuse, "REJUDGE_EVERY_S", 0.0)  # the reference: every frame judged
    every = quiet_cpu_job(JobTracker(settings()), 45)
    assert shown == every
    phases = {t: phase for t, phase, _, _ in shown}
    assert phases[33.0] == "training" and phases[34.0] == "stalled"  # held one frame, then shown
    # Frames were kept between refreshes; the stall's own frame was judged although its facts did not change.
    assert 33.0 in mine and 34.0 in mine
    assert len([t for t in mine if 18 <= t < 30]) <= 4  # no clock of the engine runs out here


def test_gpu_facts_that_move_past_noise_are_judged_at_once(monkeypatch):
    def run(tracker):
        shown = []
        for i in range(30):
            t = float(i)
            util, power = (99.0, 690.0) if i < 12 else (0.0, 119.0)  # training, then the GPUs go idle
            procs, gpus = torchrun_tree(cpu=10.0 + (2.0 * i if i < 12 else 24.0), util=util, power=power)
            chunks = ([tail(k, b"step 3/100 loss 1.0\n") for k in tracker.wanted("gpu1").tails] if i == 2 else [])
            tracker.update("gpu1", sample(t, procs, gpus, tails=chunks), now=t)
            shown.append([(v.phase, v.detail, v.since, v.evidence) for v in tracker.views(t)])
        return shown

    settings = JobSettings(stall_after_s=20)
    kept = run(JobTracker(settings))
    monkeypatch.setattr(verdict_reuse, "REJUDGE_EVERY_S", 0.0)
    every = run(JobTracker(settings))
    phases = lambda frames: [[(p, d, s) for p, d, s, _ in f] for f in frames]  # noqa: E731
    assert phases(kept) == phases(every)
    assert kept[12] == every[12]  # the frame where the GPUs went idle: judged, evidence and all
    assert len({p for f in kept for p, *_ in f}) >= 2  # the idle GPUs changed the verdict


def test_small_gpu_noise_keeps_the_verdict():
    tracker = JobTracker(JobSettings(stall_after_s=300))
    verdicts = []
    for i in range(9):
        t = 1100.0 + i  # the processes started at 1000
        procs, _ = torchrun_tree(cpu=10.0 + 2.0 * i)
        gpus = [gpu(0, [101], 99.0 - (i % 2), 690.0 + i % 3), gpu(1, [102], 98.0, 688.0)]
        chunks = [tail(k, b"step 3/100 loss 1.0\n") for k in tracker.wanted("gpu1").tails] if i == 2 else []
        tracker.update("gpu1", sample(t, procs, gpus, tails=chunks), now=t)
        verdicts.append(tracker.states("gpu1")[0].verdict)
    assert verdicts[-1].phase == "training"
    # The line (t=1102) and the first frame after it are judged; then kept (nothing moved beyond
    # noise) until the evidence is refreshed, 5 s after the last judgment.
    assert verdicts[4] is verdicts[5] is verdicts[6] is verdicts[7]
    assert verdicts[8] is not verdicts[7]

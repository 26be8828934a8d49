"""The job's own rhythm (jobs/cadence.py) and how the phase engine reads a quiet log against it, on
series shaped like the H200 measurements (tests/jobs/test_phase.py's): a held-idle GPU is 0% at ~119 W."""

from __future__ import annotations

from gpuwatch_tui.jobs.cadence import FLOOR_S, MIN_STEPS, STEP_MULTIPLE, Cadence
from gpuwatch_tui.jobs.observation import LogFacts
from gpuwatch_tui.jobs.progress import Progress

from .test_phase import T0, h200, hint, obs, series, verdict_at

STALL = 300.0  # the default stall_after


def stepped(cadence: Cadence, start: float, every: float, steps: int, phase: str = "training") -> float:
    """Feed `steps` progress lines `every` seconds apart from `start`; the last line's time."""
    t = start
    for _ in range(steps):
        cadence.note(t, hint(phase, start))
        t += every
    return t - every


def test_no_rhythm_before_enough_steps_then_the_median_interval():
    c = Cadence()
    stepped(c, T0, 2.0, MIN_STEPS)  # MIN_STEPS lines: MIN_STEPS - 1 intervals
    assert c.step_s is None and c.quiet_limit("training", STALL) == STALL
    c.note(T0 + 2.0 * MIN_STEPS, hint("training", T0))
    assert c.step_s == 2.0
    assert c.quiet_limit("training", STALL) == FLOOR_S  # max(floor, 5 x 2 s)
    assert c.quiet_limit("training", 20.0) == 20.0  # never past stall_after


def test_a_slow_steppers_limit_is_a_multiple_of_its_step_and_the_ceiling_caps_it():
    c = Cadence()
    stepped(c, T0, 40.0, 8)
    assert c.step_s == 40.0
    assert c.quiet_limit("training", STALL) == STEP_MULTIPLE * 40.0
    c = Cadence()
    stepped(c, T0, 70.0, 8)
    assert c.quiet_limit("training", STALL) == STALL


def test_a_burst_of_lines_in_one_frame_counts_once_and_a_late_outlier_does_not_move_the_median():
    c = Cadence()
    for t in (T0, T0, T0):  # a backlog read at once: one time
        c.note(t, hint("training", T0))
    last = stepped(c, T0 + 3.0, 3.0, 10)
    c.note(last + 300.0, hint("training", T0))  # one long pause (a save without a log line)
    assert c.step_s == 3.0


def test_phases_it_came_back_from_set_their_own_limits():
    c = Cadence()
    stepped(c, T0, 2.0, 10)
    ev = hint("evaluating", T0 + 30.0)
    c.note(T0 + 18.0, ev)
    assert c.quiet_limit("evaluating", STALL) == STALL  # a first evaluation: nothing to compare with
    c.note(T0 + 18.0, hint("training", T0 + 120.0))  # the evaluation took 90 s
    assert c.quiet_limit("evaluating", STALL) == 180.0  # twice the longest seen
    assert c.line("evaluating", T0 + 200.0) == "evaluating took up to 1m30s before (1 seen)"
    assert c.quiet_limit("checkpointing", STALL) == STALL  # no save seen yet


def rhythm_obs(quiet: float, *, cores: float, util: float = 0.0, power: float = 119.0, every: float = 2.0,
               steps: int = 15):
    """A job that logged a step every `every` s for `steps` steps, then `quiet` s of nothing, with the
    CPU and GPU doing what is given over the last minutes."""
    c = Cadence()
    last = stepped(c, T0, every, steps)
    now = last + quiet
    samples = series(T0, now - T0, step=5.0, cores=cores, gpus=lambda t: (h200(util=util, power=power),))
    progress = Progress(step=float(steps), total=1000.0, rate=1 / every, unit="it/s", updated_at=last)
    log = LogFacts(path="/work/run/train.log", total_bytes=4096, last_growth_at=last, hint=hint("training", T0),
                   progress=progress, last_progress_at=last)
    return obs(samples, log=log, stall=STALL, quiet_limit_s=c.quiet_limit("training", STALL),
               rhythm_line=c.line("training", now)), now


def test_a_fast_stepper_gone_quiet_with_nothing_moving_is_stalled_after_a_minute_with_its_rhythm_as_evidence():
    o, now = rhythm_obs(FLOOR_S - 1.0, cores=0.0)
    assert verdict_at(o, now).phase == "training"
    o, now = rhythm_obs(FLOOR_S + 1.0, cores=0.0)
    v = verdict_at(o, now)
    assert (v.phase, v.detail) == ("stalled", "no-progress")
    assert FLOOR_S + 1.0 < 60.0  # named within the minute
    assert f"last step {int(FLOOR_S + 1)}s ago; usually every 2.0 s (median of 14)" in v.evidence, v.evidence


def test_past_the_rhythm_but_not_the_ceiling_a_job_still_working_is_not_judged_on_its_silence():
    for kw in (dict(cores=1.0), dict(cores=0.0, util=98.0, power=690.0), dict(cores=0.15)):
        o, now = rhythm_obs(200.0, **kw)
        v = verdict_at(o, now)
        assert v.phase == "training", (kw, v)
    # past the ceiling the old rules answer as before: a busy CPU without a log line is silent
    o, now = rhythm_obs(STALL + 5.0, cores=1.0)
    assert verdict_at(o, now).phase == "silent"


def test_a_slow_stepper_busy_between_its_40s_steps_is_never_stalled():
    for quiet in (39.0, 61.0, 150.0, 299.0):
        o, now = rhythm_obs(quiet, cores=1.0, every=40.0, steps=8)
        assert verdict_at(o, now).phase == "training", quiet


def test_a_job_silent_from_its_start_waits_for_stall_after():
    samples = series(T0, 290.0, step=5.0, cores=0.0)
    log = LogFacts(path="/work/run/train.log", total_bytes=0, size=0, mtime=T0)
    assert verdict_at(obs(samples, log=log, stall=STALL, quiet_limit_s=STALL), T0 + 290.0).phase != "stalled"
    samples = series(T0, 310.0, step=5.0, cores=0.0)
    assert verdict_at(obs(samples, log=log, stall=STALL, quiet_limit_s=STALL), T0 + 310.0).phase == "stalled"

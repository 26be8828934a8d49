"""Verdicts a user can trust (issue 9, items 2-4 and 6), on the windows recorded on a real 2x H200.

Each test changes one thing of a real window (a one-second dip, a vanished process, compile workers
missed by one sample) the way it happened on the real jobs, and checks the verdicts stay honest.
"""

from __future__ import annotations

import copy

from gpuwatch_tui.jobs.activity import format_history
from gpuwatch_tui.jobs.observation import GpuReading, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import Verdict, infer_phase
from gpuwatch_tui.jobs.tracker import JobTracker

from .test_h200_runs import DATA, collapsed, describe, flex_line, hang_line, replay


def window(name):
    return copy.deepcopy(DATA["windows"][name])


# ------------------------------------------------------------------ item 2: a stalled job that vanished
def test_stalled_job_that_vanished_at_its_total_is_crashed_not_finished():
    # The real hang job logged steps 1..5 and blocked on a lock; here its total is 5, so progress sits at
    # its total while it hangs. Then it is killed from outside: no completion line, exit status unknown.
    run = replay("hang", lambda n: f"step {n}/5 loss {1.0 / n:.4f}", unbuffered=True, ended_after=3.0)
    report = describe(run)
    assert collapsed(run) == ["starting", "training", "stalled", "crashed"], report
    end = run[-1][1]
    assert (end.phase, end.detail) == ("crashed", "vanished"), report
    ev = " | ".join(end.evidence)
    assert "exit status unknown" in ev and "stalled" in ev and "stopped at step 5/5" in ev, report
    assert run[-2][1].phase == "crashed"  # judged again: still crashed


def test_stalled_buffered_job_that_vanished_without_flushing_is_crashed_killed():
    # The real buffered job (full-power training, log empty) is silent; make it hang (GPU idle, CPU flat)
    # for the rest of the window, then vanish: nothing was flushed, so it did not exit cleanly.
    w = window("buffered_quiet")
    for s in w["samples"][20:]:
        s["gpus"] = [[g[0], 0, g[2], 120.0, g[4]] for g in s["gpus"]]
        s["cpu_cores"] = 0.0
    run = replay(w, lambda n: f"step {n}", unbuffered=False, ended_after=2.0)
    report = describe(run)
    assert "stalled" in collapsed(run), report
    assert (run[-1][1].phase, run[-1][1].detail) == ("crashed", "killed"), report
    assert any("nothing flushed" in e or "exit status unknown" in e for e in run[-1][1].evidence), report


def test_job_that_was_working_and_reached_its_total_is_finished_with_lower_confidence():
    # Working right up to the end (the hang window's first seconds, steps 1..5 of 5), then gone.
    w = window("hang")
    w["samples"] = w["samples"][:8]
    run = replay(w, lambda n: f"step {n}/5 loss {1.0 / n:.4f}", unbuffered=True, ended_after=1.0)
    end = run[-1][1]
    assert end.phase == "finished" and end.confidence <= 0.6, describe(run)
    assert any("no completion line" in e for e in end.evidence)


def test_a_job_gpuwatch_killed_is_crashed_killed_by_the_user():
    tracker = JobTracker()
    job = tracker._new_job("h", "train", "j1", now=0.0)
    record = tracker.record_action("j1", "kill", "alice", 100.0)
    assert (record.action, record.user, record.when, record.run) == ("kill", "alice", 100.0, job.serial)
    w = window("hang")
    run_obs = []
    # judge the ended job through the tracker's own observation of it
    from gpuwatch_tui.jobs.judging import judge, observation
    from gpuwatch_tui.jobs.observation import ExitFacts

    job.members = {4242: 1.0}
    job.exit = ExitFacts(101.0)
    judge(job, 102.0, 0.0)
    v = job.verdict
    assert (v.phase, v.detail) == ("crashed", "killed"), v
    assert v.evidence[0].startswith("killed by alice via gpuwatch at "), v.evidence
    assert "exit status unknown" in v.evidence
    # a kill recorded on an earlier run, or long after the end, is not this run's cause
    job.actions[0] = type(record)("kill", "alice", 100.0, job.serial - 1)
    assert observation(job, 0.0).killed_by is None
    assert w and not run_obs
    try:
        tracker.record_action("nope", "kill", "alice", 1.0)
    except KeyError as e:
        assert "nope" in str(e)
    else:
        raise AssertionError("record_action on an unknown job must fail")


# ------------------------------------------------------------------ item 3: no flapping
def test_a_one_sample_dip_after_training_does_not_go_back_to_starting():
    # The real OOM job dipped to 47 % util (about 300 W) for one second at a batch-size change.
    w = window("buffered_quiet")
    w["stall_after_s"] = 600.0  # keep the whole window before the silence threshold
    for i in (8, 14, 15):  # one single dip, then a two-second one
        w["samples"][i]["gpus"] = [[g[0], 47, g[2], 300.0, g[4]] for g in w["samples"][i]["gpus"]]
    run = replay(w, lambda n: f"step {n}", unbuffered=False)
    report = describe(run)
    assert collapsed(run) == ["starting", "training"], report
    held = run[8][1]
    assert held.phase == "training" and "a dip is not a restart" in held.evidence[0], report
    assert any("47% util" in e for e in held.evidence), report


def test_one_sample_never_flips_a_confident_verdict_but_two_do():
    # The real hang window, stalled; one sample of full-power work (a late kernel) does not make it
    # training/silent again; the verdict only moves when two samples in a row say so.
    w = window("hang")
    n = len(w["samples"])
    w["samples"][n - 6]["gpus"] = [[g[0], 99, g[2], 690.0, g[4]] for g in w["samples"][n - 6]["gpus"]]
    run = replay(w, hang_line, unbuffered=True)
    report = describe(run)
    assert collapsed(run) == ["starting", "training", "stalled"], report
    assert "suggested by 1 sample(s) only" in run[n - 6][1].evidence[0], report


# ------------------------------------------------------------------ item 4: no unknown blips
def test_compile_window_with_workers_missed_by_a_sample_never_shows_unknown():
    # The compile worker pool and compiler children come and go between 1 Hz samples: drop them (and
    # the CPU of the children) from single samples in the middle of the real compile.
    w = window("flex_compile")
    for i in (6, 9, 10):
        w["samples"][i]["compile_workers"] = 0
        w["samples"][i]["child_cores"] = 0.0
        w["samples"][i]["cpu_cores"] = 0.1
    run = replay(w, flex_line, unbuffered=True)
    report = describe(run)
    assert "unknown" not in collapsed(run), report
    assert collapsed(run) == ["starting", "compiling", "training"], report


def test_unknown_needs_three_samples_in_a_row_on_a_live_job():
    training = Verdict("training", 10.0, 0.9)
    s = [ResourceSample(time=20.0, cpu_s=1.0, gpus=(GpuReading(0, 0.0, 1.0, 119.0, 700.0),))]
    # Old job, no log, GPU idle, no CPU rate (one sample): the engine alone says "unknown".
    o = JobObservation(samples=s, stall_after_s=900.0, started_at=-5000.0, log=LogFacts())
    assert infer_phase(o, 21.0).phase == "unknown"
    v1 = infer_phase(o, 21.0, training)
    v2 = infer_phase(o, 22.0, v1)
    v3 = infer_phase(o, 23.0, v2)
    assert [v1.phase, v2.phase, v3.phase] == ["training", "training", "unknown"], (v1, v2, v3)


# ------------------------------------------------------------------ item 6: history never goes back in time
def test_a_new_phase_never_starts_before_the_one_it_follows():
    # The buffered job read "starting -0.7 s": training's natural start (its first sample) preceded the
    # start-up verdict's since (the process start, moved by the clock skew).
    run = replay("buffered_quiet", lambda n: f"step {n}", unbuffered=False)
    history: list[tuple[str, float]] = []
    for _, v, _ in run:
        if not history or history[-1][0] != v.phase:
            history.append((v.phase, v.since))
    assert all(b[1] >= a[1] for a, b in zip(history, history[1:])), history
    text = format_history(history, run[-1][1].since + 5)
    assert "-" not in text.replace(" -> ", " "), text

    starting = Verdict("starting", 105.0, 0.5)
    gpus = (GpuReading(0, 99.0, 1000.0, 690.0, 700.0),)
    s = [ResourceSample(time=100.0 + i, cpu_s=float(i), gpus=gpus) for i in range(6)]
    v = infer_phase(JobObservation(samples=s, started_at=104.3, log=LogFacts()), 105.0, starting)
    assert v.phase == "training" and v.since >= 105.0 and v.since <= 105.0


# ------------------------------------------------------------------ item 9: a job first seen mid-run
def test_a_job_first_seen_mid_run_is_dated_from_its_process_start_and_says_so():
    from .procs import sample, torchrun_tree

    tr = JobTracker()
    procs, gpus = torchrun_tree(util=99.0, power=690.0)  # processes started at ~1000.1 (host clock)
    for i, t in enumerate((2000.0, 2001.0, 2002.0, 2003.0)):
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=99.0, power=690.0)
        tr.update("gpu1", sample(t, procs, gpus), now=t)
    [v] = tr.views()
    assert v.phase == "training", v
    assert abs(v.since - 1000.1) < 1.0, v.since  # not 2000 ("training 1.1s" for a job training for minutes)
    assert any(e.startswith("since: process start 16m") and "first seen mid-run" in e for e in v.evidence), v.evidence
    history = [(e.phase, e.since) for e in v.history]
    assert all(b[1] >= a[1] for a, b in zip(history, history[1:])), history


def test_a_job_seen_from_its_start_is_not_redated():
    from .procs import sample, torchrun_tree

    tr = JobTracker()
    for i, t in enumerate((1001.0, 1002.0, 1003.0, 1004.0)):
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=99.0, power=690.0)
        tr.update("gpu1", sample(t, procs, gpus), now=t)
    [v] = tr.views()
    assert v.phase == "training" and not any("first seen mid-run" in e for e in v.evidence), v


# ------------------------------------------------------------------ one ETA, computed once
def test_the_evidence_eta_is_the_progress_eta_on_a_live_logging_format_job():
    from gpuwatch_tui.model import TailChunk
    from gpuwatch_tui.vocab import fmt_duration

    from .procs import LOG, sample, torchrun_tree

    tr = JobTracker()
    data = b""
    for i, t in enumerate((1001.0, 1002.0, 1003.0, 1004.0, 1005.0, 1006.0)):
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=99.0, power=690.0)
        wants = tr.wanted("gpu1")
        line = f"step {40 * (i + 1)}/100000 loss=9.0465 samples/s=1510725\n".encode()
        data += line
        tails = [TailChunk(k, LOG.path, line, False, len(data) - len(line), len(data), None, None) for k in wants.tails]
        tr.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
    [v] = tr.views()
    assert v.progress is not None and v.progress.eta_s, v
    etas = [e for e in v.evidence if "ETA" in e]
    assert etas and f"ETA {fmt_duration(v.progress.eta_s)}" in etas[0], (etas, v.progress)

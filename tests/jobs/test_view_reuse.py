"""A job's view is made from its last one (jobs/export.py `current_view`): each part is made again only
when what it is made of changed. Here every view the tracker hands out, across runs fed with real recorded
logs (tests/data/logs) and a process tree that grows, loses a rank and ends, equals a view built from
scratch: field by field, in the instance dict, and in its JSON text. The same check, run with the
kept view made blind to one part's change at a time, fails: the runs change every part."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from gpuwatch_tui.jobs import export
from gpuwatch_tui.jobs.export import KeptView
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import TailChunk

from .fresh_view import fresh_view
from .procs import LOG, sample, torchrun_tree

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"
T0 = 1_796_000_000.0
# Real logs: a tqdm bar (\r frames in one line), a trainer's dict lines then a save, torchrun losing a
# rank to SIGKILL (traceback, exit code in the log), a CUDA OOM.
RUNS = ["tqdm-4.70.1-postfix.log", "transformers-4.57.6-trainer.log", "torchrun-2.13.0-sigkill.log",
        "cuda-2.11.0-oom.log"]
FRAMES = 26


def _chunks(data: bytes, n: int) -> list[bytes]:
    """The log's bytes as n frames' worth, cut mid-line too (as a probe reads a growing file)."""
    size = -(-len(data) // n)
    return [data[i * size:(i + 1) * size] for i in range(n)]


def _same(view, fresh, where) -> None:
    assert view == fresh, where
    assert vars(view) == vars(fresh), where
    # The JSON text too: equal numbers of another type (1 and 1.0) would print differently.
    assert json.dumps(view.to_json()) == json.dumps(fresh.to_json()), where


def run_and_compare(log_name: str) -> int:
    """Feed one run frame by frame, comparing every view handed out with a fresh one; returns how many."""
    tracker = JobTracker(JobSettings(stall_after_s=4))
    chunks = _chunks((LOGS / log_name).read_bytes(), 14)
    checked = 0
    for i in range(FRAMES):
        t = T0 + i
        ended = i >= 20  # every process gone: the run ends
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=99.0 if i < 12 else 0.0, power=690.0 if i < 12 else 119.0,
                                    with_agent=i >= 3)  # the launcher shows up: the tree and its root change
        procs = {pid: dataclasses.replace(p, start_ticks=int(p.start_time * 100)) for pid, p in procs.items()}
        if i >= 16:
            procs.pop(102)  # a rank is gone
        if ended:
            procs, gpus = {}, [dataclasses.replace(g, processes=()) for g in gpus]
        data = chunks[i] if i < len(chunks) else b""
        tails = [TailChunk(k, LOG.path, data, False, 0, None, t - 0.5 if data else None, None)
                 for k in tracker.wanted("gpu1").tails]
        tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
        jobs = tracker.states("gpu1")
        if not jobs:
            assert tracker.views(t) == [], i  # discovery holds a new job a frame or two
            continue
        job = jobs[0]
        if i == 6:
            tracker.record_action(job.id, "dump_stack", "alice", t)  # events change between frames
        if i == 9:
            record = tracker.record_action(job.id, "restart", "bob", t)
            tracker.views(t)
            tracker.set_restart_status_file(job.id, record, "/tmp/status")  # replaced in place: no new revision
        # twice at once, later with no frame between (a second later: the next second of the history text)
        for when in (t, t, t + 0.4, t + 0.4, t + 1.0, t + 61.0):
            views = tracker.views(when)
            assert [v.id for v in views] == [v.id for v in tracker.views(when, joined=False)]
            for view in views:
                _same(view, fresh_view(tracker.state(view.id), when), (log_name, i, when))
                checked += 1
        if ended and job.exit is not None and i == 22:
            # The real exit status read later: judged again with no frame (no new revision), seen at once.
            tracker.set_exit_status(job.id, 137, None)
            for view in tracker.views(when):  # the time asked last
                _same(view, fresh_view(tracker.state(view.id), when), (log_name, i, "exit status"))
                checked += 1
    return checked


@pytest.mark.parametrize("log_name", RUNS)
def test_every_view_handed_out_equals_one_built_from_scratch(log_name):
    assert run_and_compare(log_name) >= (FRAMES - 3) * 5


def test_the_runs_change_every_part_of_a_view():
    """What the check above walks through: each part of a view changes at least once."""
    changed: set[str] = set()
    original = KeptView.refresh

    def noting(self, job, at):
        before = self.fields
        view = original(self, job, at)
        changed.update(k for k, v in self.fields.items() if v != before[k])
        return view

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KeptView, "refresh", noting)
        for name in RUNS:
            run_and_compare(name)
    assert {"phase", "detail", "evidence", "confidence", "since", "advice", "actions", "pids", "processes", "root",
            "alive", "exit_code", "ended_at", "log_lines", "progress", "progress_history", "history",
            "history_text", "events"} <= changed, changed


# Each way the kept view could miss a change: its record of what a part was made from is brought up to
# date before it looks, so that part is never made again.
def _settled_as_now(*names):
    """Blind to the job's fields `names` (of export._SETTLED): the kept copy of them brought up to date."""
    def blind(kept, job, at):
        now = export._settled_copy(job)
        kept.settled = tuple(now[i] if name in names else was
                             for i, (name, was) in enumerate(zip(export._SETTLED, kept.settled)))
    return blind


BLIND = {
    "verdict": lambda kept, job, at: setattr(kept, "verdict", job.verdict),
    # (a tree that changes changes its launcher or GPUs too, on these runs: any one of them remakes all;
    # the short id is derived from the root)
    "processes": _settled_as_now("members", "start_ticks", "root", "launcher", "gpus", "short_id"),
    "every settled part": _settled_as_now(*export._SETTLED),
    "exit": lambda kept, job, at: (_settled_as_now("exit")(kept, job, at),
                                   setattr(kept, "exit_code", export._exit_code(job))),
    "log lines": lambda kept, job, at: setattr(kept, "log_total", job.primary_log.total_lines if job.logs else 0),
    "progress": lambda kept, job, at: setattr(kept, "progress", export._progress_values(job.interp.progress.current)),
    "progress points": lambda kept, job, at: (
        setattr(kept, "points_last", job.interp.progress.history[-1] if job.interp.progress.history else None)),
    "phase history": _settled_as_now("history"),
    "events": _settled_as_now("actions"),
    "history text ages": lambda kept, job, at: setattr(kept, "text_span", (-math.inf, math.inf)),
}


@pytest.mark.parametrize("part", sorted(BLIND))
def test_the_check_fails_when_the_kept_view_misses_a_change(part):
    original = KeptView.refresh
    blind = BLIND[part]

    def refresh(self, job, at):
        blind(self, job, at)
        return original(self, job, at)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KeptView, "refresh", refresh)
        with pytest.raises(AssertionError):
            for name in RUNS:
                run_and_compare(name)


def test_a_view_asked_again_with_no_frame_between_only_ages():
    """The views asked again before the next frame take the short way (no `KeptView.refresh`: the view
    as it was, or `KeptView.aged` once the age in its history text reads otherwise), and some of them
    age the history text; made blind to the time there, the check above fails."""
    aged = []
    refreshed = []
    original_aged, original_refresh = KeptView.aged, KeptView.refresh

    def noting(self, at):
        before = self.view
        view = original_aged(self, at)
        aged.append(view is not before)
        return view

    def counting(self, job, at):
        refreshed.append(at)
        return original_refresh(self, job, at)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KeptView, "aged", noting)
        mp.setattr(KeptView, "refresh", counting)
        checked = sum(run_and_compare(name) for name in RUNS)
    assert checked - len(refreshed) > 100 and any(aged), (checked, len(refreshed), len(aged), sum(aged))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(KeptView, "aged", lambda self, at: self.view)
        with pytest.raises(AssertionError):
            for name in RUNS:
                run_and_compare(name)


def test_a_phase_age_reads_the_same_across_the_span_kept_for_it():
    """The history text is made again only when the last phase's age leaves the span of ages that
    fmt_duration writes alike (`fmt_duration_span`): every age in the span reads the same, the next
    one after it does not."""
    import math

    from gpuwatch_tui.vocab import fmt_duration, fmt_duration_span

    ages = [x * 0.37 for x in range(-30, 400)] + list(range(0, 200_000, 13)) + [
        59.999, 60.0, 3599.5, 3600.0, 3659.99, 86399.99, 86400.0, 90000.0, 1e7 + 0.5, math.nan, math.inf]
    for age in ages:
        low, high = fmt_duration_span(age)
        text = fmt_duration(age)
        if not math.isfinite(age):
            assert low > high, age  # kept for no age: made each time
            continue
        assert low <= age < high, age
        inside = [low if math.isfinite(low) else -1e9, math.nextafter(high, -math.inf), (max(low, 0) + high) / 2]
        assert all(fmt_duration(a) == text for a in inside), (age, low, high)
        assert fmt_duration(high) != text, (age, high)


def test_the_settled_parts_are_the_named_fields_in_order():
    """The kept view compares these fields as `_settled` reads them (the blind checks above name them)."""
    from gpuwatch_tui.jobs.job_state import JobState

    job = JobState(id="j1", host="h", name="train", serial=1, members={7: 1.0}, start_ticks={7: 100},
                   root=(7, 1.0), gpus=(0, 1), history=[("training", 5.0)])
    named = tuple(getattr(job, name) for name in export._SETTLED)
    copied = export._settled_copy(job)
    assert export._settled(job) == named == copied
    # the containers the tracker changes in place are copies in the kept tuple, not the job's own
    for name in ("members", "start_ticks", "history", "actions"):
        assert copied[export._SETTLED.index(name)] is not getattr(job, name)

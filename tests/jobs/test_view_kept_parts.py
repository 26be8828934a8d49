"""The parts of a job's view kept between builds (process refs, progress, phase history, events) are
made again whenever what they are made of changes: every view equals one built from scratch."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.export import job_view
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import TailChunk
from gpuwatch_tui.views import JobView

FIELDS = dataclasses.fields(JobView)

from .fresh_view import fresh_view
from .procs import LOG, sample, torchrun_tree

LINES = [b"step 1/100 loss 2.5\n", b"", b"step 2/100 loss 2.4\n", b"", b"", b"Traceback (most recent call last):\n",
         b"RuntimeError: boom\n", b"", b"step 3/100 loss 2.3\n"]


def test_kept_view_parts_follow_progress_history_actions_and_processes():
    tracker = JobTracker(JobSettings(stall_after_s=4))
    compared = 0
    for i in range(24):
        t = 100.0 + i
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=99.0 if i < 14 else 0.0, power=690.0 if i < 14 else 119.0,
                                    with_agent=i >= 3)  # the launcher joins: processes change
        procs = {pid: dataclasses.replace(p, start_ticks=int(p.start_time * 100)) for pid, p in procs.items()}
        data = LINES[i] if i < len(LINES) else b""
        tails = [TailChunk(k, LOG.path, data, False, 0, None, None, None) for k in tracker.wanted("gpu1").tails]
        tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
        for job in tracker.states("gpu1"):
            if i == 10:
                tracker.record_action(job.id, "dump_stack", "alice", t)
            kept = job_view(job, t)
            job.view_parts.clear()
            assert kept == job_view(job, t), i
            compared += 1
    [job] = tracker.states("gpu1")
    view = job_view(job, 130.0)
    assert view.events and view.progress.step == 3 and len(view.history) >= 2 and view.processes
    assert compared >= 20


def test_a_view_asked_again_equals_a_fresh_one_at_the_same_and_later_times():
    """The tracker's views, asked twice a round as the dashboard does (the second time answered from
    what the first built), and again later without a frame in between (the history text ages), are
    each equal to a view built from scratch: through progress, a failure, an action and a phase change."""
    tracker = JobTracker(JobSettings(stall_after_s=4))
    checked = 0
    for i in range(24):
        t = 100.0 + i
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=99.0 if i < 14 else 0.0, power=690.0 if i < 14 else 119.0,
                                    with_agent=i >= 3)
        procs = {pid: dataclasses.replace(p, start_ticks=int(p.start_time * 100)) for pid, p in procs.items()}
        data = LINES[i] if i < len(LINES) else b""
        tails = [TailChunk(k, LOG.path, data, False, 0, None, None, None) for k in tracker.wanted("gpu1").tails]
        tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
        if i == 10:
            tracker.record_action(tracker.states("gpu1")[0].id, "dump_stack", "alice", t)
        for when in (t, t, t + 0.5, t + 61.0):  # twice at once, then later with no frame between
            for view in tracker.views(when):
                job = tracker.state(view.id)
                assert view == fresh_view(job, when), (i, when)
                # Built by the quick __init__ (quick_init.py): the very object the generated one makes.
                reference = object.__new__(JobView)
                JobView.__dataclass_init__(reference, **{f.name: getattr(view, f.name) for f in FIELDS})
                assert vars(view) == vars(reference)
                checked += 1
    phases = [p for p, _ in tracker.states("gpu1")[0].history]
    assert len(set(phases)) >= 2 and checked >= 90
    # A view kept from the round before is the same object (not rebuilt) while nothing changed.
    [job] = tracker.states("gpu1")
    assert tracker.views(200.0)[0] is tracker.views(200.0)[0]


def test_a_view_holds_every_field_and_stays_frozen():
    tracker = JobTracker(JobSettings(stall_after_s=4))
    procs, gpus = torchrun_tree()
    tracker.update("gpu1", sample(100.0, procs, gpus), now=100.0)
    [view] = tracker.views(100.0)
    assert set(vars(view)) == {f.name for f in FIELDS}  # every field, the defaults too, nothing else
    assert view.hosts == () and view.run_key is None and hash(view.pids) is not None
    try:
        view.phase = "x"
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a view must stay frozen")
    assert dataclasses.replace(view, phase="stalled").phase == "stalled" and view.phase != "stalled"

"""The parts of a job's view kept between builds (process refs, progress, phase history, events) are
made again whenever what they are made of changes: every view equals one built from scratch."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.export import job_view
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import TailChunk

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

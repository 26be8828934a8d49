"""Grouping is skipped for a frame that would group exactly as the last one, and run for any change."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import FdTarget

from .procs import gpu, proc, sample, torchrun_tree


def _count_groupings(tr: JobTracker) -> list[int]:
    calls = [0]
    real = tr._grouping.update

    def counted(*args, **kw):
        calls[0] += 1
        return real(*args, **kw)

    tr._grouping.update = counted
    return calls


def test_a_steady_host_is_grouped_once_and_a_new_gpu_process_still_makes_a_job():
    tr = JobTracker()
    calls = _count_groupings(tr)
    for t in range(5):  # CPU and GPU figures move every frame; the processes do not
        procs, gpus = torchrun_tree(cpu=10.0 + t, util=90.0 + t)
        tr.update("gpu1", sample(float(t), procs, gpus), now=float(t))
    assert calls[0] == 1
    [job] = tr.to_json()
    assert job["pids"] == [100, 101, 102]
    procs, gpus = torchrun_tree(cpu=20.0)
    procs[700] = proc(700, 1, ["python", "other.py"], cwd="/work/other")
    gpus = [*gpus, gpu(7, [700])]
    tr.update("gpu1", sample(6.0, procs, gpus), now=6.0)
    assert calls[0] == 2
    jobs = tr.to_json()
    assert len(jobs) == 2 and [700] in [j["pids"] for j in jobs]


def test_a_changed_stdout_target_or_a_job_that_ended_is_grouped_again():
    tr = JobTracker()
    calls = _count_groupings(tr)
    procs, gpus = torchrun_tree()
    tr.update("gpu1", sample(0.0, procs, gpus), now=0.0)
    tr.update("gpu1", sample(1.0, procs, gpus), now=1.0)
    assert calls[0] == 1
    moved = dict(procs)
    moved[101] = dataclasses.replace(procs[101], stdout=FdTarget("/work/run/other.log", "file"))
    tr.update("gpu1", sample(2.0, moved, gpus), now=2.0)
    assert calls[0] == 2
    grown = dict(moved)  # only the log's size differs: nothing grouping reads
    grown[101] = dataclasses.replace(moved[101], stdout=FdTarget("/work/run/other.log", "file", size=123))
    tr.update("gpu1", sample(3.0, grown, gpus), now=3.0)
    assert calls[0] == 2
    for t in (4.0, 5.0, 6.0):  # every process gone: the job ends, and the next frame is grouped again
        tr.update("gpu1", sample(t, {}, []), now=t)
    assert calls[0] >= 4
    assert all(not v.alive for v in tr.views(7.0))

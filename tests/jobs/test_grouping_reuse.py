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


def test_the_records_key_holds_only_while_the_full_jobs_key_does(monkeypatch):
    """The tracker skips grouping on `_records_key` (wants stamp, dismissed count, ended flags) rather
    than the full jobs key: frame by frame, through jobs that start, end, are dismissed, restart and
    come from the config, an unchanged records key never hides a changed jobs key."""
    from gpuwatch_tui.jobs.settings import JobSettings, JobSpec

    seen = {"checked": 0, "last": None}
    real = JobTracker.update

    def update(self, host, smp, now):
        # Both keys across the frame, and across what came between the last frame and this one.
        before = (self._records_key(host), self._jobs_key(host))
        for a, b in ((seen["last"], before), (before, None)):
            if b is None:
                real(self, host, smp, now)
                b = seen["last"] = (self._records_key(host), self._jobs_key(host))
            if a is not None and a[0] == b[0]:
                assert a[1] == b[1], (now, a, b)
                seen["checked"] += 1

    monkeypatch.setattr(JobTracker, "update", update)
    tr = JobTracker(JobSettings(jobs=(JobSpec("cfg", "gpu1", match="serve.py"),)))
    procs, gpus = torchrun_tree()
    serve = proc(700, 1, ["python", "serve.py"], cpu=1.0)
    for t in range(4):
        tr.update("gpu1", sample(float(t), {**procs, 700: serve}, gpus, matches={"cfg0": [700]}), now=float(t))
    [job] = [v for v in tr.views(4.0) if v.name != "cfg"]
    tr.dismiss(job.id)  # hidden while its processes live
    for t in range(4, 7):
        tr.update("gpu1", sample(float(t), {**procs, 700: serve}, gpus, matches={"cfg0": [700]}), now=float(t))
        if t == 5:
            tr.dismiss("cfg0")  # a configured job starts over: a new record under the same id
    for t in range(7, 10):  # the configured job's process ends (a zombie first), the torchrun tree stays
        gone = {**procs, 700: dataclasses.replace(serve, state="Z")} if t == 7 else dict(procs)
        tr.update("gpu1", sample(float(t), gone, gpus, matches={"cfg0": []}), now=float(t))
    for t in range(10, 13):  # everything gone
        tr.update("gpu1", sample(float(t), {}, [], matches={"cfg0": []}), now=float(t))
    procs2, gpus2 = torchrun_tree(cpu=50.0)
    procs2 = {pid: dataclasses.replace(p, start_time=p.start_time + 20.0) for pid, p in procs2.items()}
    for t in range(13, 17):  # a new run of the same command: a new job
        tr.update("gpu1", sample(float(t), procs2, gpus2, matches={"cfg0": []}), now=float(t))
    assert seen["checked"] >= 8

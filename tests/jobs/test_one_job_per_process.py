"""One process, one job (issue 9, item 7): a process a configured [[jobs]] entry matches is that job only,
never also a discovered one, whichever of the two saw it first. Configured wins."""

from __future__ import annotations

from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker

from .procs import gpu, sample, torchrun_tree


def jobs_with(tr, pid):
    return [v for v in tr.views() if pid in v.pids]


def test_a_gpu_process_seen_before_the_match_scan_ends_up_in_the_configured_job_only():
    tr = JobTracker(JobSettings(jobs=(JobSpec("pretrain", "gpu1", match=r"torchrun"),)))
    procs, gpus = torchrun_tree()
    # The first frames come before the probe has scanned for the match: discovery sees the ranks on the GPU.
    for t in (0.0, 1.0, 2.0, 3.0):
        tr.update("gpu1", sample(t, procs, gpus), now=t)
    assert [v.name for v in jobs_with(tr, 101)] == ["train.py"]
    # Then the scan names the agent: the configured job takes the tree, the discovered duplicate goes.
    for t in (4.0, 5.0, 6.0):
        tr.update("gpu1", sample(t, procs, gpus, matches={"cfg0": [100]}), now=t)
        owners = jobs_with(tr, 101)
        assert [v.name for v in owners] == ["pretrain"], [(v.id, v.name, v.pids) for v in tr.views()]
    assert set(jobs_with(tr, 101)[0].pids) >= {100, 101, 102}
    assert len([v for v in tr.views() if v.phase != "unknown" or v.pids]) == 1


def test_a_frame_without_the_match_list_does_not_split_off_a_discovered_job():
    tr = JobTracker(JobSettings(jobs=(JobSpec("pretrain", "gpu1", match=r"torchrun"),)))
    procs, gpus = torchrun_tree()
    tr.update("gpu1", sample(0.0, procs, gpus, matches={"cfg0": [100]}), now=0.0)
    for t in (1.0, 2.0, 3.0, 4.0):  # the match list is empty on these frames (a scan in between)
        tr.update("gpu1", sample(t, procs, gpus, matches={"cfg0": []}), now=t)
        assert [v.name for v in tr.views()] == ["pretrain"], [(v.id, v.pids) for v in tr.views()]


def test_a_gpu_grandchild_of_a_configured_process_is_the_configured_job():
    # The match names only the shell-level launcher; the GPU ranks are its grandchildren via the agent.
    procs, gpus = torchrun_tree()
    tr = JobTracker(JobSettings(jobs=(JobSpec("wrapped", "gpu1", match=r"^bash"),)))
    for t in (0.0, 1.0, 2.0):
        tr.update("gpu1", sample(t, procs, gpus, matches={"cfg0": [50]}), now=t)
    assert [v.name for v in tr.views() if 101 in v.pids and 102 in v.pids] == ["wrapped"]
    assert not [v for v in tr.views() if v.name == "train.py"], [(v.name, v.pids) for v in tr.views()]


def test_unrelated_gpu_processes_are_still_discovered_next_to_a_configured_job():
    procs, gpus = torchrun_tree()
    from .procs import proc

    other = proc(700, 1, ["/venv/bin/python", "serve.py"])
    procs = {**procs, 700: other}
    gpus = [*gpus, gpu(2, [700], 99.0, 690.0)]
    tr = JobTracker(JobSettings(jobs=(JobSpec("pretrain", "gpu1", match=r"torchrun"),)))
    for t in (0.0, 1.0, 2.0, 3.0):
        tr.update("gpu1", sample(t, procs, gpus, matches={"cfg0": [100]}), now=t)
    assert sorted(v.name for v in tr.views()) == ["pretrain", "serve.py"]

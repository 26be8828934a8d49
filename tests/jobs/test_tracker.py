from __future__ import annotations

import dataclasses
import json
import re

import pytest

from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ExitInfo, ProcessRef, TailChunk
from gpuwatch_tui.short_id import looks_like_short_id
from gpuwatch_tui.views import JobView, PhaseEntry, ProgressView

from .procs import LOG, gpu, proc, sample, torchrun_tree

JSON_KEYS = {"name", "host", "pids", "gpus", "phase", "detail", "since", "confidence", "evidence", "advice", "log",
             "exit_code", "progress", "history"}
PROGRESS_KEYS = {"step", "total", "rate", "unit", "loss", "epoch", "eta_s"}


def tail(key, data, size=None):
    return TailChunk(key, LOG.path, data, False, 0, size, None, None)


def run_torchrun(tracker, t, cpu, lines=b"", util=99.0, power=690.0):
    procs, gpus = torchrun_tree(cpu=cpu, util=util, power=power)
    wants = tracker.wanted("gpu1")
    tails = [tail(k, lines) for k in wants.tails] if lines else []
    tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)


def test_discovers_torchrun_job_tails_its_log_and_reports_json():
    tr = JobTracker(JobSettings(stall_after_s=300))
    run_torchrun(tr, 0.0, 10.0)
    wants = tr.wanted("gpu1")
    assert {100, 101, 102} <= set(wants.pids)
    assert list(wants.tails.values()) == ["/work/run/train.log"]
    run_torchrun(tr, 5.0, 15.0, b"{'loss': 2.5, 'learning_rate': 1e-4, 'epoch': 0.1}\n")
    run_torchrun(tr, 10.0, 20.0, b" 10%|#         | 100/1000 [01:00<09:00, 1.67it/s]\n")
    [job] = tr.to_json()
    assert JSON_KEYS <= set(job) and PROGRESS_KEYS <= set(job["progress"])
    assert job["name"] == "train.py" and job["pids"] == [100, 101, 102] and job["gpus"] == [0, 1]
    assert job["phase"] == "training"
    assert job["progress"]["step"] == 100 and job["progress"]["total"] == 1000 and job["progress"]["loss"] == 2.5
    assert job["history"][-1]["phase"] == "training"
    json.dumps(tr.to_json())  # serialisable
    assert tr.log_lines(job["id"])[-1].startswith(" 10%")
    assert tr.log_total(job["id"]) == 2
    assert [p.pid for p in tr.procs(job["id"])] == [100, 101, 102] and tr.outdir(job["id"]) is None


def test_crashed_job_stays_listed_until_dismissed():
    tr = JobTracker()
    run_torchrun(tr, 0.0, 10.0)
    run_torchrun(tr, 5.0, 15.0, b"[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: boom\n")
    [job] = tr.to_json()
    assert (job["phase"], job["detail"]) == ("crashed", "exception")
    gone = [ExitInfo(p, 1000.0 + p / 1000, 9.0) for p in (100, 101, 102)]
    tr.update("gpu1", sample(10.0, {}, [gpu(0, []), gpu(1, [])], gone=gone), now=10.0)
    [job] = tr.to_json()
    assert job["phase"] == "crashed" and job["alive"] is False
    tr.update("gpu1", sample(3600.0, {}, [gpu(0, [])]), now=3600.0)
    assert len(tr.to_json()) == 1
    assert tr.dismiss(job["id"]) and tr.to_json() == []


def test_vanished_processes_without_exit_info_are_gone_after_a_grace():
    tr = JobTracker()
    run_torchrun(tr, 0.0, 10.0)
    tr.update("gpu1", sample(1.0, {}, []), now=1.0)
    assert tr.to_json()[0]["alive"] is True
    tr.update("gpu1", sample(2.0, {}, []), now=2.0)
    assert tr.to_json()[0]["alive"] is False


def test_ranks_are_held_back_until_their_launcher_is_known_then_published_as_one_job():
    # Frame 1: the probe reports only the GPU processes; their parent (the torchrun agent) is unknown.
    tr = JobTracker()
    procs, gpus = torchrun_tree(with_agent=False)
    tr.update("gpu1", sample(0.0, procs, gpus), now=0.0)
    assert tr.to_json() == [] and not tr.ready("gpu1")  # no job per rank, never published
    assert 100 in tr.wanted("gpu1").pids  # ask for the parent
    # Frame 2: the agent and its shell are reported: one job from its first appearance.
    run_torchrun(tr, 1.0, 10.0)
    jobs = tr.to_json()
    assert len(jobs) == 1 and jobs[0]["pids"] == [100, 101, 102] and jobs[0]["launcher"] == "torchrun"
    assert [h["phase"] for h in jobs[0]["history"]][:1] != []


def test_ranks_whose_parent_never_shows_are_published_after_the_hold_and_merged_later():
    tr = JobTracker()
    procs, gpus = torchrun_tree(with_agent=False)
    for t in (0.0, 1.0):
        tr.update("gpu1", sample(t, procs, gpus), now=t)
        assert tr.to_json() == []
    tr.update("gpu1", sample(2.0, procs, gpus), now=2.0)  # the parent is still unknown: publish anyway
    assert len(tr.to_json()) == 2
    run_torchrun(tr, 3.0, 10.0)  # the launcher shows up late: the ranks merge under it
    jobs = tr.to_json()
    assert len(jobs) == 1 and jobs[0]["pids"] == [100, 101, 102]
    # The ranks' CPU time did not move; the launcher's past CPU time is not a rate of the last second.
    assert not any(e.startswith("CPU +") for e in jobs[0]["evidence"]), jobs[0]["evidence"]
    run_torchrun(tr, 4.0, 12.0)  # now both ranks use 2 cores each over 1 s
    [job] = tr.to_json()
    assert any(e.startswith("CPU +4.0 cores") for e in job["evidence"]), job["evidence"]


def test_a_job_whose_parent_is_a_known_shell_is_published_at_once():
    tr = JobTracker()
    run_torchrun(tr, 0.0, 10.0)
    assert len(tr.to_json()) == 1


def test_configured_job_by_regex_with_log_and_output_dir():
    spec = JobSpec("pretrain", "gpu1", match=r"train\.py", logs=("logs/out.log",), output_dir="/data/ckpt",
                   stall_after_s=60)
    tr = JobTracker(JobSettings(jobs=(spec,)))
    [job] = tr.to_json()
    assert job["phase"] == "unknown" and job["configured"] is True
    tr.update("gpu1", sample(0.0, {}, []), now=0.0)  # a frame from before the probe had the job's match
    [job] = tr.to_json()
    assert job["detail"] == "observing" and job["evidence"] == ["looking for a process: cmdline /train\\.py/"]
    tr.update("gpu1", sample(0.5, {}, [], matches={"cfg0": []}), now=0.5)  # it looked: nothing matches
    [job] = tr.to_json()
    assert job["detail"] == "not-running" and job["evidence"] == ["no process matches cmdline /train\\.py/"]
    wants = tr.wanted("gpu1")
    assert wants.matches == {"cfg0": {"regex": r"train\.py", "pid_file": None}}
    p = proc(200, 50, ["python", "train.py"], cpu=5.0)
    tr.update("gpu1", sample(1.0, {200: p}, [gpu(0, [200])], matches={"cfg0": [200]}), now=1.0)
    wants = tr.wanted("gpu1")
    assert list(wants.tails.values()) == ["/work/run/logs/out.log"]
    assert list(wants.dirs.values()) == ["/data/ckpt"]
    [job] = tr.to_json()
    assert job["name"] == "pretrain" and job["pids"] == [200] and job["stall_after_s"] == 60


def test_cpu_only_job_from_configuration_goes_stalled_when_nothing_moves():
    spec = JobSpec("hang", "cpu1", match="hang.py", stall_after_s=30)
    tr = JobTracker(JobSettings(jobs=(spec,)))
    for i in range(12):
        t = float(i * 5)
        p = proc(300, 1, ["python", "-u", "hang.py"], cpu=3.0, unbuffered=True, start=0.0)
        chunks = [tail(k, b"step 3/100 loss 1.0\n") for k in tr.wanted("cpu1").tails] if i == 1 else []
        tr.update("cpu1", sample(t, {300: p}, [], tails=chunks, matches={"cfg0": [300]}), now=t)
    [job] = tr.to_json()
    assert job["phase"] == "stalled", job
    assert any(e.startswith("log silent") for e in job["evidence"])


def test_configured_job_by_pid_file_and_phase_history():
    spec = JobSpec("byfile", "h", pid_file="/run/train.pid")
    tr = JobTracker(JobSettings(jobs=(spec,), stall_after_s=30))
    assert tr.wanted("h").matches == {"cfg0": {"regex": None, "pid_file": "/run/train.pid"}}
    for i in range(20):
        t = float(i * 5)
        p = proc(400, 1, ["python", "-u", "x.py"], cpu=1.0 + (t if i < 4 else 20.0), unbuffered=True, start=-10.0)
        chunks = [tail(k, b"step %d/100 loss 1.0\n" % i) for k in tr.wanted("h").tails] if i < 4 else []
        tr.update("h", sample(t, {400: p}, [], tails=chunks, matches={"cfg0": [400]}), now=t)
    [job] = tr.to_json(95.0)
    assert [h["phase"] for h in job["history"]] == ["starting", "training", "stalled"]
    assert job["history_text"].startswith("starting ") and " -> stalled " in job["history_text"]
    assert job["progress_history"][-1]["step"] == 3


def _with_ticks(procs):
    return {pid: dataclasses.replace(p, start_ticks=500_000 + pid) for pid, p in procs.items()}


def test_views_are_typed_carry_process_refs_and_round_trip_through_json():
    tr = JobTracker(JobSettings(jobs=(JobSpec("idle-cfg", "gpu1", match="never-matches-anything"),)))
    for t, line in ((0.0, b""), (5.0, b" 10%|#         | 100/1000 [01:00<09:00, 1.67it/s]\n")):
        procs, gpus = torchrun_tree(cpu=10.0 + t)
        tails = [tail(k, line) for k in tr.wanted("gpu1").tails] if line else []
        tr.update("gpu1", sample(t, _with_ticks(procs), gpus, tails=tails, matches={"cfg0": []}), now=t)
    views = {v.name: v for v in tr.views(6.0)}
    job = views["train.py"]
    assert isinstance(job, JobView) and isinstance(job.progress, ProgressView)
    assert job.pids == (100, 101, 102) and job.gpus == (0, 1)
    assert job.processes == tuple(ProcessRef("gpu1", pid, 500_000 + pid) for pid in (100, 101, 102))
    assert job.root == ProcessRef("gpu1", 100, 500_100)  # the torchrun agent
    assert (job.progress.step, job.progress.total, job.progress.fraction) == (100, 1000, 0.1)
    assert job.history[-1] == PhaseEntry(job.phase, job.since)
    assert views["idle-cfg"].root is None and views["idle-cfg"].processes == () and views["idle-cfg"].configured
    for view in views.values():
        data = json.loads(json.dumps(view.to_json()))
        assert JobView.from_json(data) == view
        assert data["actions"] == list(view.actions)
    assert tr.to_json(6.0) == [v.to_json() for v in tr.views(6.0)]  # one serialisation


def test_job_view_from_json_says_what_is_wrong():
    good = {"id": "h:1", "name": "a", "host": "h"}
    read = JobView.from_json(good)
    # (JSON written before views carried a short id: one is derived, stable for the same job)
    assert dataclasses.replace(read, short_id="") == JobView("h:1", "a", "h")
    assert looks_like_short_id(read.short_id) and JobView.from_json(good).short_id == read.short_id
    for bad, says in (({"name": "a", "host": "h"}, "missing key 'id'"),
                      ({**good, "pids": ["1"]}, "'pids' should be a list of integers"),
                      ({**good, "progress": {"step": "ten"}}, "expected a number"),
                      ({**good, "history": [{"phase": "training"}]}, "missing key 'since'")):
        with pytest.raises(ValueError, match=re.escape(says)):
            JobView.from_json(bad)

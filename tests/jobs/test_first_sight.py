"""Bugs seen live: a healthy job called `stalled` on first sight, and a configured regex that merged
two separate runs of a script into one job."""

from __future__ import annotations

from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import FdTarget, TailChunk

from .procs import gpu, proc, sample

DEMO = FdTarget("/tmp/demo.log", "file", append=False, size=69_000)
TQDM = b"train:  37%|###7      | 370/1000 [01:15<02:08, 4.91it/s, loss=0.4123]"


def demo_proc(cpu, start=0.0, pid=500, ppid=1, cmd=("python3", "train_tqdm.py")):
    # start= is the host clock; proc() adds pid/1000 to it.
    return proc(pid, ppid, list(cmd), cpu=cpu, start=start, stdout=DEMO, unbuffered=False)


def chunk(key, data, size, mtime):
    return TailChunk(key, DEMO.path, data, False, 0, size, mtime, None)


def test_healthy_job_first_seen_after_76s_is_not_stalled_before_its_log_is_read():
    tr = JobTracker(JobSettings(stall_after_s=60))
    t = 76.0
    # Frame 1: the job is discovered; the tracker only now asks for its log.
    tr.update("h", sample(t, {500: demo_proc(70.0)}, [gpu(0, [500], util=0, power=119)]), now=t)
    [job] = tr.to_json(t)
    assert job["phase"] in ("unknown", "starting") and job["phase"] != "stalled", job
    assert job["detail"] == "observing"
    assert not any("log empty" in e for e in job["evidence"]), job["evidence"]
    assert any("log not read yet" in e for e in job["evidence"])
    assert tr.ready("h") is False
    # Frame 2: the tail arrives (69 KB of backlog, written 0.1 s ago): the bar says training.
    [key] = tr.wanted("h").tails
    data = b"x" * 100 + b"\n" + TQDM
    tr.update("h", sample(t + 1, {500: demo_proc(71.0)}, [gpu(0, [500], util=0, power=119)],
                          tails=[chunk(key, data, 69_000, t + 0.9)]), now=t + 1)
    [job] = tr.to_json(t + 1)
    assert job["phase"] == "training", job
    assert job["progress"]["step"] == 370
    assert tr.ready("h") is True


def test_one_sample_with_a_quiet_log_is_observing_then_stalled_with_a_cpu_rate():
    tr = JobTracker(JobSettings(stall_after_s=60))
    t = 1000.0
    p = demo_proc(50.0)
    tr.update("h", sample(t, {500: p}, [gpu(0, [500], util=0, power=119)]), now=t)
    [key] = tr.wanted("h").tails
    # The log was last written 10 minutes ago: silent since its mtime, not since we looked.
    stale = [chunk(key, b"step 5/50 loss 1.0\n", 19, t - 600)]
    # Frame 2 comes at the same instant (no CPU rate yet): observing, never stalled on one look.
    tr.update("h", sample(t, {500: p}, [gpu(0, [500], util=0, power=119)], tails=stale), now=t)
    [job] = tr.to_json(t)
    assert (job["phase"], job["detail"]) == ("unknown", "observing"), job
    tr.update("h", sample(t + 1, {500: p}, [gpu(0, [500], util=0, power=119)]), now=t + 1)
    [job] = tr.to_json(t + 1)
    assert (job["phase"], job["detail"]) == ("stalled", "no-progress"), job
    assert any(e.startswith("log silent 10m") for e in job["evidence"]), job["evidence"]
    assert any(e.startswith("CPU flat") for e in job["evidence"])


def test_log_empty_is_claimed_only_when_the_probe_says_the_file_is_empty():
    tr = JobTracker(JobSettings(stall_after_s=30))
    t = 1000.0
    p = demo_proc(50.0, start=t - 100)
    tr.update("h", sample(t, {500: p}, [gpu(0, [500])]), now=t)
    [key] = tr.wanted("h").tails
    tr.update("h", sample(t + 1, {500: p}, [gpu(0, [500])], tails=[chunk(key, b"", 0, t - 99.5)]), now=t + 1)
    [job] = tr.to_json(t + 1)
    assert job["phase"] == "stalled", job
    assert "log empty after 1m40s (demo.log)" in job["evidence"], job["evidence"]


def test_two_runs_of_a_configured_script_are_two_jobs():
    spec = JobSpec("tqdm", "h", match="train_tqdm.py")
    tr = JobTracker(JobSettings(jobs=(spec,)))
    a = demo_proc(10.0, pid=20913, ppid=100, start=0.0)
    assert tr.ready("h") is False  # the probe has not scanned for it yet
    tr.update("h", sample(9.0, {}, [], matches={}), now=9.0)
    assert tr.ready("h") is False
    tr.update("h", sample(10.0, {20913: a}, [], matches={"cfg0": [20913]}), now=10.0)
    assert tr.ready("h") is False  # one sample, log not read
    b = demo_proc(5.0, pid=21725, ppid=200, start=80.0)
    both = {20913: demo_proc(20.0, pid=20913, ppid=100, start=0.0), 21725: b}
    tr.update("h", sample(90.0, both, [], matches={"cfg0": [20913, 21725]}), now=90.0)
    jobs = {j["name"]: j for j in tr.to_json(90.0)}
    assert set(jobs) == {"tqdm", "tqdm#2"}, jobs
    assert jobs["tqdm"]["pids"] == [20913] and jobs["tqdm#2"]["pids"] == [21725]
    assert jobs["tqdm#2"]["configured"] is True
    # The first run ends; the second keeps its own job and name.
    tr.update("h", sample(95.0, {21725: b}, [], matches={"cfg0": [21725]}), now=95.0)
    tr.update("h", sample(96.0, {21725: b}, [], matches={"cfg0": [21725]}), now=96.0)
    jobs = {j["name"]: j for j in tr.to_json(96.0)}
    assert jobs["tqdm"]["alive"] is False and jobs["tqdm#2"]["alive"] is True
    assert jobs["tqdm#2"]["pids"] == [21725]
    # A third run takes the ended slot (a restart of `tqdm`), not a new `#3`.
    c = demo_proc(1.0, pid=23000, ppid=300, start=95.5)
    tr.update("h", sample(97.0, {21725: b, 23000: c}, [], matches={"cfg0": [21725, 23000]}), now=97.0)
    jobs = {j["name"]: j for j in tr.to_json(97.0)}
    assert set(jobs) == {"tqdm", "tqdm#2"} and jobs["tqdm"]["pids"] == [23000] and jobs["tqdm"]["alive"]
    # Dismissing a live extra hides that run; the configured job itself stays.
    assert tr.dismiss("cfg0#2")
    tr.update("h", sample(98.0, {21725: b, 23000: c}, [], matches={"cfg0": [21725, 23000]}), now=98.0)
    assert [j["name"] for j in tr.to_json(98.0)] == ["tqdm"]


def test_a_launcher_and_its_ranks_matched_together_stay_one_job():
    spec = JobSpec("pretrain", "h", match=r"train\.py")
    tr = JobTracker(JobSettings(jobs=(spec,)))
    agent = proc(100, 50, ["torchrun", "--nproc_per_node", "2", "train.py"], name="pt_elastic")
    r0 = proc(101, 100, ["python", "-u", "train.py"])
    r1 = proc(102, 100, ["python", "-u", "train.py"])
    procs = {100: agent, 101: r0, 102: r1}
    tr.update("h", sample(1.0, procs, [], matches={"cfg0": [101, 102, 100]}), now=1.0)
    [job] = tr.to_json(1.0)
    assert job["name"] == "pretrain" and job["pids"] == [100, 101, 102]


def test_a_zombie_left_by_a_finished_run_is_not_a_new_run():
    # Seen end to end: the run exits, nobody reaps it (its shell is gone), the probe's match list still
    # names it. The configured job must stay `finished`, not restart as a new run of itself.
    import dataclasses

    spec = JobSpec("tqdm", "h", match="train_tqdm.py")
    tr = JobTracker(JobSettings(jobs=(spec,)))
    a = demo_proc(10.0, pid=600, start=0.0)
    for t in (1.0, 2.0):
        tr.update("h", sample(t, {600: a}, [], matches={"cfg0": [600]}), now=t)
    [key] = tr.wanted("h").tails
    done = b"train: 100%|##########| 40/40 [00:04<00:00, 9.8it/s]\n"
    tr.update("h", sample(3.0, {600: a}, [], matches={"cfg0": [600]}, tails=[chunk(key, done, len(done), 2.9)]),
              now=3.0)
    zombie = dataclasses.replace(a, state="Z")
    for t in (4.0, 5.0, 6.0, 7.0):
        tr.update("h", sample(t, {600: zombie}, [], matches={"cfg0": [600]}), now=t)
    [job] = tr.to_json(7.0)
    assert (job["name"], job["phase"], job["alive"]) == ("tqdm", "finished", False), job
    assert [h["phase"] for h in job["history"]][-1] == "finished"

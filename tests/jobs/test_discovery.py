from __future__ import annotations

from gpuwatch_tui.jobs.discovery import (
    configured_group,
    discover,
    launcher_kind,
    output_dir_from_cmdline,
    parents_to_watch,
    script_name,
)

from .procs import gpu, proc, torchrun_tree


def test_torchrun_ranks_group_under_the_agent_named_after_the_script():
    procs, gpus = torchrun_tree()
    [job] = discover(procs, gpus)
    assert job.root == 100 and job.launcher == "torchrun"
    assert job.name == "train.py"
    assert set(job.main) == {100, 101, 102} and job.gpus == (0, 1)
    assert job.logs == ("/work/run/train.log",)


def test_ranks_alone_until_the_parent_is_known_and_the_parent_is_requested():
    procs, gpus = torchrun_tree(with_agent=False)
    jobs = discover(procs, gpus)
    assert sorted(j.root for j in jobs) == [101, 102]
    assert parents_to_watch(procs, [101, 102]) == {100}


def test_the_walk_stops_at_a_shell():
    procs, gpus = torchrun_tree()
    # The shell above the agent stays requested (it ends the walk; nothing above it is asked for).
    assert parents_to_watch(procs, [101, 102]) == {50}
    [job] = discover(procs, gpus)
    assert job.root == 100 and 50 not in job.main


def test_parent_requests_do_not_flip_between_frames():
    # A parent reported (because we asked) must stay asked for: otherwise the wanted list changes
    # every frame and the probe rescans /proc each time.
    procs, _ = torchrun_tree()
    without_shell = {k: v for k, v in procs.items() if k != 50}
    assert parents_to_watch(procs, [101, 102]) == parents_to_watch(without_shell, [101, 102]) == {50}


def test_plain_python_job():
    p = proc(200, 50, ["python", "train.py"])
    [job] = discover({200: p, 50: proc(50, 1, ["bash"], name="bash", is_python=False)}, [gpu(0, [200])])
    assert (job.root, job.name, job.launcher) == (200, "train.py", None)


def test_claimed_pids_are_left_to_configured_jobs():
    procs, gpus = torchrun_tree()
    assert discover(procs, gpus, claimed={100, 101, 102}) == []


def test_launcher_kinds():
    assert launcher_kind(proc(1, 0, ["python", "-m", "torch.distributed.run", "x.py"])) == "torchrun"
    assert launcher_kind(proc(1, 0, ["/usr/bin/python3", "/venv/bin/accelerate", "launch", "x.py"])) == "accelerate"
    assert launcher_kind(proc(1, 0, ["/venv/bin/python", "/venv/bin/accelerate", "config"])) is None
    assert launcher_kind(proc(1, 0, ["python", "-m", "deepspeed.launcher.launch", "--world_info=x"])) == "deepspeed"
    assert launcher_kind(proc(1, 0, ["python", "train.py"])) is None


def test_script_names():
    assert script_name(["python3", "-u", "-X", "dev", "/a/b/train.py", "--x"]) == "train.py"
    assert script_name(["python", "-m", "my.trainer", "--cfg", "a.yaml"]) == "my.trainer"
    assert script_name(["/venv/bin/torchrun", "--nproc_per_node=8", "pretrain.py"]) == "pretrain.py"
    assert script_name(["./a.out"]) == "a.out"


def test_output_dir_from_cmdline():
    assert output_dir_from_cmdline(["python", "t.py", "--output_dir", "out"], "/work") == "/work/out"
    assert output_dir_from_cmdline(["python", "t.py", "--output-dir=/data/run1"], "/work") == "/data/run1"
    assert output_dir_from_cmdline(["python", "t.py"], "/work") is None


def test_configured_group_root_is_the_topmost_match():
    procs, _ = torchrun_tree()
    root, main = configured_group([102, 101, 100], procs)
    assert root == 100 and main[0] == 100

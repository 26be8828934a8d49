"""Where a job ends going up (jobs/boundary.py, discovery.parent_in_job) on constructed process tables: a
sweep driver, a notebook kernel or a harness is outside every job; a parent with evidence that it trains
(GPU, job candidate, ML runtime mapped) or a launcher agent is inside. Discovery, the parents asked for,
the tracker's jobs and the kill plan all agree."""

from __future__ import annotations

from dataclasses import replace

from gpuwatch_tui.actions.job_tree import JobTree
from gpuwatch_tui.jobs.boundary import TrainingEvidence, driver_kind
from gpuwatch_tui.jobs.discovery import discover, launcher_kind, parent_in_job, parents_to_watch
from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ChildProc, HostSample

from .procs import gpu, proc

SHELL = proc(50, 1, ["bash"], name="bash", is_python=False, stdout=None)
RUNS = (201, 202, 203)


def sweep(driver_cmd=("python", "sweep.py"), name="python3", runs=RUNS):
    """A driver (pid 100) under a shell with three `train.py` runs on three GPUs."""
    kids = tuple(ChildProc(pid, "python3", ("python", "train.py", "--lr", str(i)), "S", 1.0, start_ticks=pid * 10)
                 for i, pid in enumerate(runs))
    procs = {50: SHELL, 100: proc(100, 50, list(driver_cmd), name=name, children=kids)}
    for i, pid in enumerate(runs):
        procs[pid] = proc(pid, 100, ["python", "train.py", "--lr", str(i)])
    procs = {pid: replace(p, start_ticks=pid * 10) for pid, p in procs.items()}  # (pinned: kill plans name them)
    return procs, [gpu(i, [pid]) for i, pid in enumerate(runs)]


def test_a_sweep_driver_without_torch_is_in_no_job_and_each_run_is_one():
    procs, gpus = sweep()
    jobs = discover(procs, gpus)
    assert sorted((j.root, j.main, j.name) for j in jobs) == [(p, (p,), "train.py") for p in RUNS]
    # the driver is asked for (so it is known to be a driver), nothing above it
    assert parents_to_watch(procs, RUNS, TrainingEvidence.of(on_gpu=RUNS)) == {100}


def test_a_parent_that_trains_keeps_its_children_in_its_job():
    procs, gpus = sweep(["python", "train.py"])  # its children run its own script (workers, a re-run rank)
    for jobs in (discover(procs, gpus, ml_loaded=[100]), discover(procs, gpus, candidates=[100])):
        [job] = jobs
        assert job.root == 100 and set(job.main) == {100, *RUNS} and job.name == "train.py"
    # a parent on a GPU keeps even the scripts it starts (an eval run of the trainer's)
    procs, gpus = sweep()
    [job] = discover(procs, [*gpus, gpu(9, [100])])
    assert job.root == 100 and set(job.main) == {100, *RUNS}


def test_named_drivers_stay_out_even_with_torch_loaded():
    for cmd in (["/venv/bin/python", "-m", "ipykernel_launcher", "-f", "/run/kernel-1.json"],
                ["/venv/bin/python", "/venv/bin/pytest", "-x", "tests"],
                ["python", "-m", "pytest", "tests/test_train.py"],
                ["/venv/bin/python", "/venv/bin/wandb", "agent", "me/proj/abc"],
                ["/venv/bin/python", "/venv/bin/snakemake", "-j", "4"]):
        procs, gpus = sweep(cmd)
        assert driver_kind(procs[100]) is not None, cmd
        assert sorted(j.root for j in discover(procs, gpus, ml_loaded=[100])) == list(RUNS), cmd
        # one with torch loaded and stdout to a file (a job candidate) is still no job; training on a GPU itself
        # (in the notebook), it is one of its own, beside its runs
        assert sorted(j.main for j in discover(procs, gpus, candidates=[100])) == [(p,) for p in RUNS]
        assert sorted(j.main for j in discover(procs, [*gpus, gpu(9, [100])])) == [(100,), *((p,) for p in RUNS)]
    procs, _ = sweep(["python", "train.py"])
    assert driver_kind(procs[100]) is None


def test_launcher_agents_root_their_jobs_and_mpi_is_one():
    for cmd, name in ((["mpirun", "-np", "3", "python", "train.py"], "mpirun"),
                      (["/usr/bin/mpiexec.hydra", "-n", "3", "python", "train.py"], "mpiexec.hydra"),
                      (["/venv/bin/python", "/venv/bin/horovodrun", "-np", "3", "python", "train.py"], "python3"),
                      (["python", "-m", "torch.distributed.run", "--nproc_per_node", "3", "train.py"], "python3")):
        procs, gpus = sweep(cmd, name=name)
        assert launcher_kind(procs[100]), cmd
        [job] = discover(procs, gpus)
        assert job.root == 100 and job.launcher and job.name == "train.py", cmd
    # a script that merely names a launcher in its arguments is not one
    assert launcher_kind(proc(1, 0, ["python", "sweep.py", "--via", "mpirun"])) is None


def test_a_shell_or_session_manager_is_never_inside_even_with_evidence():
    evidence = TrainingEvidence.of(on_gpu=[50, 60], ml_loaded=[50, 60])
    assert not parent_in_job(SHELL, proc(51, 50, ["python", "train.py"]), evidence)
    assert not parent_in_job(proc(60, 1, ["tmux", "new", "-d"], name="tmux: server", is_python=False),
                             proc(61, 60, ["python", "train.py"]), evidence)


def test_multiprocessing_children_are_named_after_the_driver_script():
    procs, gpus = sweep()
    spawn = ["/venv/bin/python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, "
             "pipe_handle=7)", "--multiprocessing-fork"]
    for pid in RUNS:
        procs[pid] = proc(pid, 100, spawn)
    assert {j.name for j in discover(procs, gpus)} == {"sweep.py"}


def _tracker_frames(procs, gpus, frames=4, **kw):
    tr = JobTracker(JobSettings(**kw))
    for t in range(frames):
        tr.update("h", HostSample(time=float(t), gpu_source="nvml", gpus=list(gpus), procs=dict(procs)), now=float(t))
    return tr


def test_the_tracker_gives_one_job_per_run_and_no_kill_plan_names_the_driver():
    procs, gpus = sweep()
    tr = _tracker_frames(procs, gpus)
    views = sorted(tr.views(), key=lambda v: v.root.pid)
    assert [(v.name, v.root.pid, v.pids) for v in views] == [("train.py", p, (p,)) for p in RUNS]
    for v in views:
        targets = JobTree("h", v.name, tuple(tr.procs(v.id))).targets()
        assert [t.pid for t in targets] == [v.root.pid], targets


def test_a_jobs_entry_that_matches_the_driver_is_the_driver_level_job():
    procs, gpus = sweep()
    tr = JobTracker(JobSettings(jobs=(JobSpec("lr-sweep", "h", match=r"sweep\.py"),)))
    for t in range(4):
        tr.update("h", HostSample(time=float(t), gpu_source="nvml", gpus=list(gpus), procs=dict(procs),
                                  matches={"cfg0": [100]}), now=float(t))
    [view] = tr.views()
    assert view.name == "lr-sweep" and view.root.pid == 100 and set(view.pids) == {100, *RUNS}
    targets = JobTree("h", view.name, tuple(tr.procs(view.id))).targets()
    assert {t.pid for t in targets} == {100, *RUNS}


def test_a_driver_is_told_by_the_program_it_runs_not_by_its_arguments():
    assert driver_kind(proc(1, 0, ["python", "train.py", "--output_dir", "/data/jupyter/pytest-runs"])) is None
    assert driver_kind(proc(1, 0, ["python", "-u", "-m", "pytest", "-x"])) == "test-harness"
    assert driver_kind(proc(1, 0, ["/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser"])) == "notebook"
    assert driver_kind(proc(1, 0, ["ray::ImplicitFunc.train"], name="ray::ImplicitFu")) == "sweep"
    assert driver_kind(proc(1, 0, ["python", "/venv/bin/wandb", "agent", "me/p/x"])) == "sweep"
    assert driver_kind(proc(1, 0, ["python", "/venv/bin/wandb", "sync", "run-1"])) is None


def test_a_driver_with_torch_loaded_is_still_outside_the_runs_of_scripts_it_starts():
    procs, gpus = sweep()
    # torch imported (a job candidate with stdout to a file): its child runs a script of its own
    jobs = discover(procs, gpus, candidates=[100], ml_loaded=[100])
    assert sorted(j.main for j in jobs) == [(p,) for p in RUNS]
    # ... and before any run touches a GPU, it is no job of its own either
    assert discover(procs, [], candidates=[100]) == []
    # a job of it from before its runs showed is dropped once they do
    tr = JobTracker(JobSettings())
    lone = {50: SHELL, 100: replace(procs[100], children=())}
    for t in range(3):
        tr.update("h", HostSample(time=float(t), gpu_source="nvml", gpus=[], procs=lone, candidates={100: "torch"}),
                  now=float(t))
    assert [v.pids for v in tr.views()] == [(100,)]
    for t in range(3, 7):
        tr.update("h", HostSample(time=float(t), gpu_source="nvml", gpus=list(gpus), procs=dict(procs),
                                  candidates={100: "torch"}), now=float(t))
    assert sorted(v.pids for v in tr.views()) == [(p,) for p in RUNS]


def test_workers_that_are_not_runs_of_their_own_stay_in_the_training_process_job():
    procs, gpus = sweep(["python", "train.py"])
    for pid, cmd in zip(RUNS, (["python", "train.py"],  # a Lightning rank re-running the script / a fork
                               ["/venv/bin/python", "/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/"
                                "__main__.py", "--workers=4"],
                               ["/venv/bin/python", "-m", "wandb", "service"])):
        procs[pid] = replace(procs[pid], cmdline=tuple(cmd))
    [job] = discover(procs, gpus, candidates=[100])
    assert job.root == 100 and set(job.main) == {100, *RUNS}

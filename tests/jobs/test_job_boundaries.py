"""Job boundaries people recognise, with real drivers run as people run them, seen through the real probe:
a sweep driver, a multiprocessing driver, a Hydra multirun, a Jupyter kernel, a bash loop, nohup and tmux
start training runs; each run is a job of its own (named after its script), the driver is in no job, and a
kill of one run signals that run (and its own workers) only: the driver and the sibling runs live on.
A harness that runs jobs one after another gives one job per run, each with its end reported."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

import psutil
import pytest

from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv

from tests.support.fake_nvml import build_fake_nvml, fake_nvml_env, write_pids

from .boundary_support import (
    DRIVERS,
    PY,
    TRAIN,
    Started,
    alive,
    clean_env,
    gone_within,
    job_rooted_at,
    jobs_holding,
    kill,
    needs_torch,
    note,
    wait_file,
    wait_jobs,
)
from .probe_loop import ProbeLoop

pytestmark = [needs_torch, pytest.mark.timeout(240)]


@pytest.fixture
def started():
    s = Started()
    yield s
    s.stop()


@pytest.fixture
def probe_loop():
    loop = ProbeLoop(JobTracker(JobSettings(stall_after_s=120)), interval=0.5)
    yield loop
    loop.close()


def _start(started, argv, cwd, log_name="driver.log", env=None) -> psutil.Process:
    with open(cwd / log_name, "wb") as log:  # (log_name "/dev/null": output nobody can follow)
        p = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env or clean_env(), start_new_session=True)
    return started.track(p.pid)


def _kill_one_run(loop, driver: psutil.Process, runs: list[psutil.Process], victim: psutil.Process) -> set[int]:
    """Kill the victim run's job; assert only it went: the driver and the other runs live on."""
    view = job_rooted_at(loop.tracker, victim.pid)
    tree, report = kill(loop, view)
    signalled = {o.pid for o in report.outcomes if o.signalled}
    assert report.ok, report.summary()
    assert driver.pid not in {t.pid for t in tree.targets()}, tree.targets()
    assert victim.pid in signalled and driver.pid not in signalled
    assert not signalled & {r.pid for r in runs if r is not victim}
    assert gone_within(victim)
    time.sleep(0.5)  # (a driver that went down with its run would be gone by now)
    assert alive(driver), "the driver went down with one of its runs"
    assert all(alive(r) for r in runs if r is not victim), "a sibling run went down"
    return signalled


@pytest.mark.parametrize("torch_in_driver", [False, True])
def test_popen_sweep_driver_three_runs_are_three_jobs_and_a_kill_takes_one(tmp_path, started, probe_loop,
                                                                          torch_in_driver):
    env = clean_env(SWEEP_IMPORT_TORCH="1") if torch_in_driver else clean_env()
    driver = _start(started, [PY, str(DRIVERS / "sweep_popen.py"), str(tmp_path / "runs.txt"), "0.1", "0.2", "0.3"],
                    tmp_path, env=env)
    runs = [started.track(int(p)) for p in wait_file(tmp_path / "runs.txt")]
    views = wait_jobs(probe_loop, [r.pid for r in runs])
    assert [views[r.pid].name for r in runs] == ["train_standin.py"] * 3
    assert not jobs_holding(probe_loop.tracker, driver.pid), "the sweep driver is inside a job"
    assert len({v.id for v in views.values()}) == 3
    logs = {views[r.pid].log for r in runs}
    assert logs == {str(tmp_path / f"run_lr{lr}.log") for lr in ("0.1", "0.2", "0.3")}
    # (it was asked for: the probe says whether it has torch; with torch and stdout to a file it is a job
    # candidate, still no job: it starts scripts of their own)
    assert (driver.pid in probe_loop.last_frame["ml"]) == torch_in_driver
    signalled = _kill_one_run(probe_loop, driver, runs, runs[1])
    assert signalled == {runs[1].pid}
    note("popen sweep" + (" (torch in the driver)" if torch_in_driver else ""), probe_loop, signalled)


@pytest.mark.parametrize("method,way", [("spawn", "process"), ("fork", "pool")])
def test_multiprocessing_driver_each_child_that_trains_is_a_job(tmp_path, started, probe_loop, method, way):
    pids = tmp_path / "runs.txt"
    driver = _start(started, [PY, str(DRIVERS / "mp_sweep.py"), method, way], tmp_path, "sweep.log",
                    env=clean_env(RUN_PIDS=str(pids)))
    runs = [started.track(int(p)) for p in wait_file(pids, lines=2)]
    assert all(r.ppid() == driver.pid for r in runs)
    wait_jobs(probe_loop, [r.pid for r in runs])
    # The runs' code is the driver's script: named after it (once the driver is known, a frame or two after
    # the run: a spawned child's own command line is `python -c ...`); the short id tells them apart.
    names = lambda: {job_rooted_at(probe_loop.tracker, r.pid).name for r in runs}  # noqa: E731
    assert probe_loop.run_until(lambda: names() == {"mp_sweep.py"}, 30), names()
    assert not jobs_holding(probe_loop.tracker, driver.pid)
    signalled = _kill_one_run(probe_loop, driver, runs, runs[0])
    assert signalled == {runs[0].pid}
    note(f"multiprocessing {method} {way}", probe_loop, signalled)


def test_workers_of_a_training_process_stay_in_its_job(tmp_path, started, probe_loop):
    trainer = _start(started, [PY, str(DRIVERS / "train_with_workers.py"), str(tmp_path / "workers.txt")], tmp_path,
                     "train.log")
    workers = [int(p) for p in wait_file(tmp_path / "workers.txt")[0:2]]
    [view] = wait_jobs(probe_loop, [trainer.pid]).values()
    ok = probe_loop.run_until(lambda: len(jobs_holding(probe_loop.tracker, workers[0])) == 1, 30)
    assert ok and jobs_holding(probe_loop.tracker, workers[0])[0].id == view.id
    assert all([v.id for v in jobs_holding(probe_loop.tracker, w)] == [view.id] for w in workers), \
        "a worker became a job of its own"
    assert trainer.pid in probe_loop.last_frame["ml"]  # the probe saw torch in the parent
    tree, report = kill(probe_loop, view)
    assert {t.pid for t in tree.targets()} >= {trainer.pid, *workers}
    assert report.ok and gone_within(trainer)
    note("training process with workers", probe_loop, {o.pid for o in report.outcomes if o.signalled})


def test_hydra_multirun_in_process_is_one_job_whose_runs_are_its_output_folders(tmp_path, started, probe_loop):
    # Hydra's basic launcher runs the sweep's jobs one after another inside the multirun process itself: that
    # process IS the training process, so the multirun is one job; its runs are the sweep dir's folders.
    sweep_dir = tmp_path / "multirun"
    app = _start(started, [PY, str(DRIVERS / "hydra_app.py"), "-m", "lr=0.1,0.2", "steps=25",
                           f"hydra.sweep.dir={sweep_dir}"], tmp_path, "hydra.log")
    [view] = wait_jobs(probe_loop, [app.pid]).values()
    assert view.name == "hydra_app.py" and view.output_dir == str(sweep_dir)
    ok = probe_loop.run_until(lambda: (sweep_dir / "1").is_dir() and (
        (d := probe_loop.tracker.outdir(view.id)) is not None and (d.newest_name or "").split("/")[0] == "1"), 60)
    assert ok, f"the second run's folder was not seen in the job's output dir: {probe_loop.tracker.outdir(view.id)}"
    assert [v.id for v in jobs_holding(probe_loop.tracker, app.pid)] == [view.id]  # still one job, same id
    tree, report = kill(probe_loop, job_rooted_at(probe_loop.tracker, app.pid))
    assert [t.pid for t in tree.targets()] == [app.pid]
    assert report.ok and gone_within(app)
    note("hydra multirun (basic launcher)", probe_loop, {o.pid for o in report.outcomes if o.signalled})


def test_jupyter_kernel_with_torch_is_never_in_the_job_of_the_run_it_starts(tmp_path, started, probe_loop,
                                                                             monkeypatch):
    from jupyter_client.manager import KernelManager

    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path), env=clean_env(JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")))
    kc = None
    try:
        kernel = started.track(km.provisioner.process.pid)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        code = (f"import subprocess, sys, torch\n"
                f"run = subprocess.Popen([sys.executable, {str(TRAIN)!r}], stdout=open('train.log', 'wb'),"
                f" stderr=subprocess.STDOUT)\n"
                f"open('run.pid', 'w').write(str(run.pid))\n")
        reply = kc.execute_interactive(code, timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        run = started.track(int(wait_file(tmp_path / "run.pid")[0]))
        views = wait_jobs(probe_loop, [run.pid])
        assert views[run.pid].name == "train_standin.py"
        assert not jobs_holding(probe_loop.tracker, kernel.pid), "the notebook kernel is inside a job"
        signalled = _kill_one_run(probe_loop, kernel, [run], run)
        assert signalled == {run.pid}
        note("jupyter kernel", probe_loop, signalled)
    finally:
        if kc is not None:
            kc.stop_channels()
        km.shutdown_kernel(now=True)


def _sequential_runs_each_a_job_with_its_end(loop, pids_file, count: int):
    """Runs that come one after another: each is found as its own job, and each one's end is reported
    while the driver goes on."""
    seen: dict[int, str] = {}

    def each_found_and_ended():
        for pid in (int(p) for p in pids_file.read_text().split()) if pids_file.exists() else ():
            v = job_rooted_at(loop.tracker, pid)
            if v is not None:
                seen.setdefault(pid, v.id)
        ended = [v for v in loop.tracker.views() if v.id in seen.values() and not v.alive]
        return len(seen) == count and len(ended) == count

    ok = loop.run_until(each_found_and_ended, 150)
    views = {v.id: v for v in loop.tracker.views()}
    assert ok, f"runs found {seen}; jobs {[(v.id, v.alive, v.phase) for v in views.values()]}"
    assert len(set(seen.values())) == count
    for job_id in seen.values():
        v = views[job_id]
        assert v.name == "train_standin.py" and v.ended_at is not None and v.phase == "finished", (v.phase, v.evidence)
    return seen


def test_a_python_harness_running_jobs_one_after_another_reports_each_finish(tmp_path, started, probe_loop):
    pids = tmp_path / "runs.txt"
    driver = _start(started, [PY, str(DRIVERS / "sweep_sequential.py"), str(pids), "15", "0.1", "0.2"], tmp_path)
    _sequential_runs_each_a_job_with_its_end(probe_loop, pids, 2)
    assert alive(driver) and not jobs_holding(probe_loop.tracker, driver.pid)
    note("python harness, sequential", probe_loop)


def test_a_bash_for_loop_gives_one_job_per_run_each_finish_reported(tmp_path, started, probe_loop):
    pids = tmp_path / "runs.txt"
    loop_cmd = (f"for lr in 0.1 0.2; do {shlex.quote(PY)} {shlex.quote(str(TRAIN))} --steps 15 --lr $lr "
                f"> run_$lr.log 2>&1 & echo $! >> {shlex.quote(str(pids))}; wait; done; sleep 600")
    shell = _start(started, ["bash", "-c", loop_cmd], tmp_path)
    _sequential_runs_each_a_job_with_its_end(probe_loop, pids, 2)
    assert alive(shell) and not jobs_holding(probe_loop.tracker, shell.pid)
    note("bash for loop", probe_loop)


def test_a_sweep_under_nohup_runs_are_jobs_and_a_kill_spares_the_driver(tmp_path, started, probe_loop):
    cmd = (f"cd {shlex.quote(str(tmp_path))} || exit 1; setsid nohup {shlex.quote(PY)} "
           f"{shlex.quote(str(DRIVERS / 'sweep_popen.py'))} runs.txt 0.1 0.2 > sweep.log 2>&1 < /dev/null & echo $!")
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30, env=clean_env(),
                         stdin=subprocess.DEVNULL)
    driver = started.track(int(out.stdout.split()[-1]))
    runs = [started.track(int(p)) for p in wait_file(tmp_path / "runs.txt")]
    views = wait_jobs(probe_loop, [r.pid for r in runs])
    assert {v.name for v in views.values()} == {"train_standin.py"} and len(views) == 2
    assert not jobs_holding(probe_loop.tracker, driver.pid)
    signalled = _kill_one_run(probe_loop, driver, runs, runs[0])
    assert signalled == {runs[0].pid}
    note("nohup sweep", probe_loop, signalled)


def test_a_run_in_tmux_is_its_own_job_and_its_kill_spares_the_tmux_server_and_shell(tmp_path, started, probe_loop):
    socket = f"gwbound{id(tmp_path) % 100000}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    inner = (f"cd {shlex.quote(str(tmp_path))}; {shlex.quote(PY)} {shlex.quote(str(TRAIN))} > train.log 2>&1 & "
             f"echo $! > run.pid; wait; sleep 600")
    subprocess.run([*tmux, "new-session", "-d", "-s", "t", "-x", "80", "-y", "24", inner], check=True, timeout=30,
                   env=clean_env())
    server = None
    try:
        server = started.track(int(subprocess.run([*tmux, "display-message", "-p", "#{pid}"], capture_output=True,
                                                  text=True, check=True, timeout=30).stdout))
        run = started.track(int(wait_file(tmp_path / "run.pid")[0]))
        shell = started.track(run.ppid())
        views = wait_jobs(probe_loop, [run.pid])
        assert views[run.pid].name == "train_standin.py"
        assert not jobs_holding(probe_loop.tracker, server.pid) and not jobs_holding(probe_loop.tracker, shell.pid)
        signalled = _kill_one_run(probe_loop, shell, [run], run)
        assert signalled == {run.pid} and alive(server)
        note("tmux", probe_loop, signalled)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)
        if server is not None:
            gone_within(server, 10)


def test_killing_a_harness_run_spares_the_harness_which_goes_on_to_the_next_run(tmp_path, started, probe_loop):
    pids = tmp_path / "runs.txt"
    driver = _start(started, [PY, str(DRIVERS / "sweep_sequential.py"), str(pids), "0", "0.1", "0.2"], tmp_path)
    first = started.track(int(wait_file(pids)[0]))
    wait_jobs(probe_loop, [first.pid])
    signalled = _kill_one_run(probe_loop, driver, [first], first)
    assert signalled == {first.pid}
    second = started.track(int(wait_file(pids, lines=2)[1]))
    views = wait_jobs(probe_loop, [second.pid])
    ended = probe_loop.run_until(lambda: not any(v.alive for v in jobs_holding(probe_loop.tracker, first.pid)), 30)
    assert ended and views[second.pid].id not in {v.id for v in jobs_holding(probe_loop.tracker, first.pid)}
    [first_job] = jobs_holding(probe_loop.tracker, first.pid)
    assert first_job.phase == "crashed", (first_job.phase, first_job.evidence)  # a kill is never `finished`
    note("python harness, a run killed", probe_loop, signalled)


class GpuProbeLoop(ProbeLoop):
    """The real probe reading the NVML stand-in (tests/support/fake_nvml.c), whose GPU processes are the pids
    in a file the test writes: processes hold a GPU context without a GPU."""

    def __init__(self, tracker: JobTracker, env: dict) -> None:
        self.tracker = tracker
        self.host = "h"
        self.frames = 0
        self.last_frame = {}
        self.probe = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env)
        self.probe.stdin.write(build_payload({"interval": 0.5, "gpu_source": "nvml"}))
        self.probe.stdin.flush()


@pytest.fixture
def gpu_loop(tmp_path_factory):
    folder = build_fake_nvml(tmp_path_factory.mktemp("nvml"))
    pids = tmp_path_factory.mktemp("gpu") / "pids"
    write_pids(pids, [])
    loop = GpuProbeLoop(JobTracker(JobSettings(stall_after_s=120)), fake_nvml_env(folder, 2, [], pids_file=pids))
    loop.gpu_pids = pids
    yield loop
    loop.close()


def test_spawned_ranks_on_the_gpu_are_one_job_under_a_parent_known_only_by_its_torch(tmp_path, started, gpu_loop):
    # stdout to /dev/null: neither the parent nor the ranks are job candidates; the ranks hold the GPUs, and the
    # parent's only evidence that it trains is torch in its maps (the probe's "ml")
    parent = _start(started, [PY, str(DRIVERS / "spawn_trainer.py"), str(tmp_path / "ranks.txt")], tmp_path,
                    env=clean_env())
    ranks = [started.track(int(p)) for p in wait_file(tmp_path / "ranks.txt")]
    write_pids(gpu_loop.gpu_pids, [r.pid for r in ranks])
    [view] = wait_jobs(gpu_loop, [parent.pid]).values()
    ok = gpu_loop.run_until(lambda: set(job_rooted_at(gpu_loop.tracker, parent.pid).pids) >= {r.pid for r in ranks}, 30)
    assert ok, job_rooted_at(gpu_loop.tracker, parent.pid)
    view = job_rooted_at(gpu_loop.tracker, parent.pid)
    assert view.name == "spawn_trainer.py" and set(view.gpus) == {0, 1}
    assert parent.pid in gpu_loop.last_frame["ml"]
    tree, report = kill(gpu_loop, view)
    assert {t.pid for t in tree.targets()} >= {parent.pid, *(r.pid for r in ranks)} and report.ok
    note("torch.multiprocessing.spawn (ranks on the GPU stand-in)", gpu_loop,
         {o.pid for o in report.outcomes if o.signalled})


def test_runs_on_the_gpu_under_a_driver_without_torch_are_jobs_of_their_own(tmp_path, started, gpu_loop):
    driver = _start(started, [PY, str(DRIVERS / "sweep_popen.py"), str(tmp_path / "runs.txt"), "0.1", "0.2"],
                    tmp_path, log_name="/dev/null")
    runs = [started.track(int(p)) for p in wait_file(tmp_path / "runs.txt")]
    write_pids(gpu_loop.gpu_pids, [r.pid for r in runs])
    views = wait_jobs(gpu_loop, [r.pid for r in runs])
    assert [views[r.pid].gpus for r in runs] == [(0,), (1,)]
    assert not jobs_holding(gpu_loop.tracker, driver.pid) and driver.pid not in gpu_loop.last_frame["ml"]
    signalled = _kill_one_run(gpu_loop, driver, runs, runs[0])
    assert signalled == {runs[0].pid}
    note("popen sweep (runs on the GPU stand-in)", gpu_loop, signalled)

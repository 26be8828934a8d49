"""A DISCOVERED job (no [[jobs]] entry) restarted with -u over a real sshd host and the real Monitor keeps
its identity: the new process joins the old job (same id and name, history kept, the restart in its
events, exit facts of the new run), and no second job appears."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import psutil
import pytest

from tests.actions.test_service_sshd import SCRIPTS, USER, gone, monitor_for, procs, service_for, view  # noqa: F401
from tests.core.helpers import wait_for


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.timeout(180)
async def test_restart_of_a_discovered_job_keeps_its_id_name_and_history(sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    work = tmp_path / "work"
    work.mkdir()
    for name in ("torch_buffered_job.py", "buffered_job.py"):
        shutil.copy(SCRIPTS / name, work / name)
    script = work / "torch_buffered_job.py"
    log = work / "train.log"
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    with open(log, "wb") as out:  # nohup python train.py > train.log 2>&1 &
        old = subprocess.Popen([sys.executable, str(script)], cwd=work, env=env, stdin=subprocess.DEVNULL,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    started.append(old)
    monitor = monitor_for(ssh_env, host, [])
    await monitor.start()

    def job_with(pid):
        return next((v for v in monitor.tracker.views() if pid in v.pids), None)

    try:
        await wait_for(lambda: job_with(old.pid) is not None, 60, what="the torch job discovered")
        job = job_with(old.pid)
        assert job.name == "torch_buffered_job.py"
        service = service_for(monitor, tmp_path)
        await wait_for(lambda: service.facts_ready(job.id), 15, what="restart facts captured at discovery")
        plan = service.plan(job.id, "restart_unbuffered")
        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        new_pid = outcome.report.pid
        extra.append(new_pid)
        assert psutil.Process(new_pid).cmdline()[:2] == [sys.executable, "-u"]
        assert gone(old.pid)

        await wait_for(lambda: (v := view(monitor, job.id)) is not None and v.alive and new_pid in v.pids, 60,
                       what="the new process is the same discovered job")
        again = view(monitor, job.id)
        assert again.name == job.name
        assert any(e.startswith(f"restarted with -u by {USER} via gpuwatch") for e in again.events), again.events
        assert again.exit_code is None and again.phase not in ("crashed", "finished"), again.to_json()
        # History kept: the old run's phases are still there, before the new run's.
        assert len(again.to_json()["history"]) >= 2, again.to_json()["history"]
        # One job, not two: nothing else holds the new pid or the old run.
        assert [v.id for v in monitor.tracker.views() if new_pid in v.pids] == [job.id]
        assert len([v for v in monitor.tracker.views() if v.name == job.name]) == 1
        (work / "stop").write_text("")
        await wait_for(lambda: view(monitor, job.id).exit_code == 3, 30, what="the new run's real exit code")
        assert view(monitor, job.id).to_json()["phase"] == "crashed"
    finally:
        await monitor.stop()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.timeout(180)
async def test_a_restart_by_another_gpuwatch_is_seen_as_the_same_job(sshd_factory, ssh_env, tmp_path, procs):
    """`gpuwatch restart` from a shell while a dashboard watches: the watcher never hears of the action,
    yet the old run ends crashed/killed (not `finished` when the new run writes into the same log) and the
    new run carries the job on, from the restart's marker line in the shared log."""
    started, extra = procs
    (host,) = sshd_factory(1)
    work = tmp_path / "work"
    work.mkdir()
    for name in ("torch_buffered_job.py", "buffered_job.py"):
        shutil.copy(SCRIPTS / name, work / name)
    log = work / "train.log"
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    with open(log, "wb") as out:
        old = subprocess.Popen([sys.executable, str(work / "torch_buffered_job.py")], cwd=work, env=env,
                               stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    started.append(old)
    watcher = monitor_for(ssh_env, host, [])
    actor = monitor_for(ssh_env, host, [])
    await watcher.start()
    await actor.start()

    def job_with(monitor, pid):
        return next((v for v in monitor.tracker.views() if pid in v.pids), None)

    try:
        await wait_for(lambda: job_with(watcher, old.pid) and job_with(actor, old.pid), 60, what="both see the job")
        watched = job_with(watcher, old.pid)
        service = service_for(actor, tmp_path)
        acting = job_with(actor, old.pid)
        await wait_for(lambda: service.facts_ready(acting.id), 15, what="restart facts captured")
        outcome = await service.execute(service.plan(acting.id, "restart_unbuffered"))
        assert outcome.ok, outcome.summary()
        new_pid = outcome.report.pid
        extra.append(new_pid)
        await actor.stop()

        await wait_for(lambda: (v := view(watcher, watched.id)) is not None and v.alive and new_pid in v.pids, 60,
                       what="the watcher carries the job on into the new run")
        again = view(watcher, watched.id)
        assert any(e.startswith(f"restarted with -u by {USER} via gpuwatch") for e in again.events), again.events
        phases = [h["phase"] for h in again.to_json()["history"]]
        assert "finished" not in phases, phases  # the old run's end is not read as a clean exit
        assert [v.id for v in watcher.tracker.views() if new_pid in v.pids] == [watched.id]
    finally:
        await actor.stop()
        await watcher.stop()

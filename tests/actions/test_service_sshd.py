"""Actions end to end: ActionService over the real Monitor and a real sshd host, on real process trees.

Kill (launcher + 2 workers + grandchildren that ignore SIGTERM), a (pid, start) that no longer matches
refused, a buffered job restarted with -u (same job, streaming output, exit status), a process blocked on
a lock dumped with py-spy uploaded to a host that lacks it. Every test starts and stops its own processes
by pid.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuwatch_tui.actions.audit import AuditLog
from gpuwatch_tui.actions.service import ActionRefused, ActionService
from gpuwatch_tui.actions.settings import ActionSettings
from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor

from tests.core.helpers import host_entry, settings_for, wait_for
from tests.actions.pyspy_helpers import BLOCKED_ON

SCRIPTS = Path(__file__).resolve().parent / "scripts"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
USER = "ana"  # the local user the service acts for (what the audit log and the job's history name)


def monitor_for(ssh_env, host, jobs: list[dict]) -> Monitor:
    cfg = parse_config({"settings": settings_for(ssh_env), "hosts": [host_entry(host)],
                        "jobs": [dict(j, host=host.name) for j in jobs]}, "t.toml")
    return Monitor(cfg)


def service_for(monitor: Monitor, tmp_path: Path, **settings) -> ActionService:
    s = ActionSettings(**{"kill_grace_s": 1.0, "kill_wait_s": 2.0, "restart_gpu_wait_s": 10.0, **settings})
    return ActionService(monitor, s, AuditLog(tmp_path / "state" / "audit.jsonl"), False, USER)


def view(monitor: Monitor, job_id: str):
    return next((v for v in monitor.tracker.views() if v.id == job_id), None)


async def live_job(monitor: Monitor, job_id: str, n_pids: int = 1, timeout: float = 20.0):
    await wait_for(lambda: (v := view(monitor, job_id)) is not None and v.alive and len(v.pids) >= n_pids
                   and monitor.tracker.procs(job_id), timeout, what=f"job {job_id} alive")
    return view(monitor, job_id)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop_pids(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def procs():
    """Processes the test started (Popen objects): killed by pid and reaped at the end."""
    started: list[subprocess.Popen] = []
    extra: list[int] = []
    yield started, extra
    stop_pids([p.pid for p in started] + extra)
    for p in started:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


def start_tree(tmp_path: Path, started) -> dict:
    pids_file = tmp_path / "tree-pids.json"
    p = subprocess.Popen([PY, str(SCRIPTS / "tree_job.py"), str(pids_file)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    started.append(p)
    deadline = time.monotonic() + 15
    while not pids_file.exists():
        assert time.monotonic() < deadline, "tree did not start"
        time.sleep(0.05)
    return json.loads(pids_file.read_text())


async def test_kill_takes_the_whole_tree_and_the_job_ends_killed_by_the_user(sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    tree = start_tree(tmp_path, started)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    started.append(bystander)
    everyone = [tree["launcher"], *tree["workers"], *tree["grandchildren"]]
    extra += everyone
    monitor = monitor_for(ssh_env, host, [{"name": "trainer", "match": str(tmp_path / "tree-pids")}])
    await monitor.start()
    try:
        job = await live_job(monitor, "cfg0", n_pids=1)
        service = service_for(monitor, tmp_path)
        plan = service.plan(job.id, "kill")
        assert plan.confirm and plan.host == host.name and plan.job == "trainer"
        assert set(everyone) <= set(plan.pids), (everyone, plan.pids)
        assert bystander.pid not in plan.pids
        me = psutil.Process().username()
        assert plan.users == (me,)
        text = plan.text()
        assert host.name in text and str(tree["grandchildren"][0]) in text and me in text and "SIGKILL" in text

        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        by_pid = {o.pid: o.outcome for o in outcome.report.outcomes}
        assert all(by_pid[g] == "killed" for g in tree["grandchildren"]), by_pid  # they ignore SIGTERM
        for pid in everyone:
            await wait_for(lambda: gone(pid), 5, what=f"{pid} gone")
        assert not gone(bystander.pid)

        await wait_for(lambda: not view(monitor, job.id).alive, 10, what="job ended")
        ended = view(monitor, job.id)
        assert (ended.phase, ended.detail) == ("crashed", "killed"), ended
        assert ended.evidence[0].startswith(f"killed by {USER} via gpuwatch at ")
        assert ended.to_json()["events"] == [ended.evidence[0]]
        results = [e["result"] for e in service.audit.entries()]
        assert results == ["started", "done"]
        entry = service.audit.entries()[-1]
        assert entry["local_user"] == USER and entry["host"] == host.name and entry["job"] == "trainer"
        assert set(everyone) <= set(entry["pids"]) and "SIGTERM" in entry["command"]
        with pytest.raises(ActionRefused, match="has ended"):
            service.plan(job.id, "kill")
        assert service.audit.entries()[-1]["result"].startswith("refused: ")
    finally:
        await monitor.stop()


async def test_a_pid_whose_start_no_longer_matches_is_refused_end_to_end(sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    tree = start_tree(tmp_path, started)
    extra += [tree["launcher"], *tree["workers"], *tree["grandchildren"]]
    monitor = monitor_for(ssh_env, host, [{"name": "trainer", "match": str(tmp_path / "tree-pids")}])
    await monitor.start()
    try:
        job = await live_job(monitor, "cfg0")
        service = service_for(monitor, tmp_path)
        plan = service.plan(job.id, "kill")
        # As if every pid had been reused since the plan was made: same pids, other start times.
        shifted = dataclasses.replace(plan.tree, procs=tuple(
            dataclasses.replace(p, start_ticks=p.start_ticks + 7, children=tuple(
                dataclasses.replace(c, start_ticks=c.start_ticks + 7) for c in p.children))
            for p in plan.tree.procs))
        outcome = await service.execute(dataclasses.replace(plan, tree=shifted))
        assert not outcome.ok
        assert {o.outcome for o in outcome.report.outcomes} == {"reused"}, outcome.summary()
        assert not any(gone(pid) for pid in [tree["launcher"], *tree["workers"], *tree["grandchildren"]])
        assert service.audit.entries()[-1]["result"] in ("failed", "partial")
        assert view(monitor, job.id).alive
    finally:
        await monitor.stop()


async def test_restart_with_u_is_the_same_job_streams_and_reports_the_exit_code(sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    work = tmp_path / "work"
    work.mkdir()
    script = work / "train_buffered.py"
    shutil.copy(SCRIPTS / "buffered_job.py", script)
    log = work / "train.log"
    env = dict(os.environ, GW_TEST_TOKEN="t0k3n")
    env.pop("PYTHONUNBUFFERED", None)
    with open(log, "wb") as out:  # nohup python train.py > train.log 2>&1 &
        old = subprocess.Popen([PY, str(script)], cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    started.append(old)
    monitor = monitor_for(ssh_env, host, [{"name": "buffered", "match": str(script), "logs": [str(log)]}])
    await monitor.start()
    try:
        job = await live_job(monitor, "cfg0")
        service = service_for(monitor, tmp_path)
        await wait_for(lambda: service.facts_ready(job.id), 10, what="restart facts captured at discovery")
        plan = service.plan(job.id, "restart_unbuffered")
        assert plan.restart.argv[:2] == (PY, "-u") and "PYTHONUNBUFFERED=1" in plan.command
        assert any("as read at" in w for w in plan.warnings)
        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        new_pid = outcome.report.pid
        extra.append(new_pid)
        assert psutil.Process(new_pid).cmdline()[:2] == [PY, "-u"]
        assert psutil.Process(new_pid).cwd() == str(work)
        assert psutil.Process(new_pid).environ()["GW_TEST_TOKEN"] == "t0k3n"
        assert gone(old.pid)

        # The same job (same id and name), now the new process, with the restart in its events.
        await wait_for(lambda: (v := view(monitor, job.id)) is not None and v.alive and new_pid in v.pids, 15,
                       what="the new process is the same job")
        again = view(monitor, job.id)
        assert again.name == "buffered"
        assert any(e.startswith(f"restarted with -u by {USER} via gpuwatch") for e in again.events)
        # Old content kept, the marker, and output streaming while it runs.
        await wait_for(lambda: log.read_text().count("step ") >= 3, 10, what="steps streaming into the log")
        text = log.read_text()
        assert text.index("hello from pid %d" % old.pid) < text.index("=== gpuwatch: restarted with -u")
        (work / "stop").write_text("")
        await wait_for(lambda: view(monitor, job.id).exit_code == 3, 20, what="the real exit code")
        final = view(monitor, job.id).to_json()
        assert final["exit_code"] == 3 and final["exit_signal"] is None and final["phase"] == "crashed"
        assert [e["result"] for e in service.audit.entries()] == ["started", "done"]
    finally:
        await monitor.stop()


async def test_dump_uploads_py_spy_to_a_host_without_it_and_shows_the_wait(sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    path = [d for d in host.environment["PATH"].split(":") if d and not (Path(d) / "py-spy").exists()]
    host.set_path(path)
    host.set_env(XDG_CACHE_HOME=str(tmp_path / "hostcache"))
    script = tmp_path / "blocked_lock_job.py"
    script.write_text(BLOCKED_ON["lock"])
    p = subprocess.Popen([PY, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    started.append(p)
    assert p.stdout.readline().strip() == "ready"
    monitor = monitor_for(ssh_env, host, [{"name": "locked", "match": str(script)}])
    await monitor.start()
    try:
        job = await live_job(monitor, "cfg0")
        service = service_for(monitor, tmp_path)
        plan = service.plan(job.id, "dump_stack")
        assert plan.pids == (p.pid,) and f"py-spy dump --json --pid {p.pid}" in plan.command
        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        report = outcome.report
        assert report.pyspy_source == "uploaded" and report.pyspy.startswith(str(tmp_path / "hostcache"))
        main = report.processes[0].main_thread
        assert any("acquire" in f.name or "lock" in f.where.lower() for f in main.frames), main.frames
        assert report.saved_to is not None and report.saved_to.exists()
        assert report.saved_to.parent == tmp_path / "state" / "dumps"
        assert service.latest_dump(job.id) is report
        assert psutil.Process(p.pid).status() != psutil.STATUS_STOPPED
        await wait_for(lambda: any(e.startswith("py-spy ") for e in view(monitor, job.id).evidence), 10,
                       what="the dump's finding in the job's evidence")
    finally:
        await monitor.stop()

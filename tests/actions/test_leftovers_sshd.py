"""Leftovers end to end on a real sshd host: a real job whose main process is SIGKILLed while its forked workers
(one in its own session) live on and, through the nvidia-smi stand-in, hold GPU memory. The engine shows them
as that job's leftovers (and in `status --json`), a reap plans exactly them, refuses in read-only mode, and
after the confirm they are gone. A fresh `gpuwatch` finds a worker orphaned before it looked, and reaps it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch_tui.actions.audit import AuditLog
from gpuwatch_tui.actions.service import ActionRefused, ActionService
from gpuwatch_tui.actions.settings import ActionSettings
from gpuwatch_tui.incident_report import render_report
from gpuwatch_tui.monitor import Monitor
from tests.actions.test_cli_actions_sshd import audit, env_for, gpuwatch
from tests.core.helpers import host_entry, make_config, settings_for, toml_value, wait_for

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
SCRIPT = Path(__file__).parent / "scripts" / "leftover_job.py"
MIB = 1024 * 1024


class Job:
    """The job's main process: started as people do (`nohup python ... &` from a shell that returns), so it is
    nobody's child here (a Python parent such as this test would read as its launcher)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self):
        return 0 if gone(self.pid) else None

    def kill(self) -> None:
        if not gone(self.pid):
            os.kill(self.pid, signal.SIGKILL)

    def wait(self, limit: float) -> None:
        deadline = time.monotonic() + limit
        while not gone(self.pid):
            assert time.monotonic() < deadline, f"pid {self.pid} still there after {limit} s"
            time.sleep(0.05)


def start_job(tmp_path: Path, workers: int):
    pids_file = tmp_path / "workers"
    launched = subprocess.run(
        ["sh", "-c", 'nohup "$0" "$1" "$2" "$3" > job.log 2>&1 < /dev/null & echo $!', PY, str(SCRIPT),
         str(pids_file), str(workers)], cwd=tmp_path, capture_output=True, text=True, check=True)
    job = Job(int(launched.stdout.strip()))
    deadline = time.monotonic() + 30
    while not (tmp_path / "job.log").exists() or b"ready" not in (tmp_path / "job.log").read_bytes():
        assert time.monotonic() < deadline and not gone(job.pid), "the job did not start"
        time.sleep(0.05)
    return job, [int(x) for x in pids_file.read_text().split()]


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def stop(job, workers):
    for pid in workers:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
    if job.poll() is None:
        job.kill()
    job.wait(5)


def leftovers_of(monitor, pid):
    return next((v for v in monitor.tracker.views() if v.leftovers is not None and pid in v.leftovers.pids), None)


async def test_workers_outliving_a_killed_main_process_are_its_leftovers_and_reap_ends_exactly_them(
        sshd_factory, ssh_env, tmp_path):
    (host,) = sshd_factory(1)
    job, workers = start_job(tmp_path, 2)
    host.set_scenario(gpus=2, phase="training", uuid_prefix=f"GPU-{host.name}",
                      processes=[{"gpu": 0, "pid": job.pid, "used_memory_mib": 40_000}])
    config = make_config(ssh_env, [host_entry(host)])
    monitor = Monitor(config)
    await monitor.start()
    try:
        await wait_for(lambda: any(job.pid in v.pids for v in monitor.tracker.views()), 30, what="the job")
        await wait_for(lambda: (s := monitor.last_samples.get(host.name)) is not None and job.pid in s.procs
                       and {c.pid for c in s.procs[job.pid].children} >= set(workers), 30, what="its workers")
        [view] = [v for v in monitor.tracker.views() if job.pid in v.pids]
        assert view.leftovers is None and view.root.pid == job.pid  # its main process lives: nothing left over
        os.kill(job.pid, signal.SIGKILL)
        job.wait(5)
        # The workers, re-parented, hold GPU memory now (the stand-in lists them).
        host.update_scenario(processes=[{"gpu": 0, "pid": workers[0], "used_memory_mib": 12_000},
                                        {"gpu": 1, "pid": workers[1], "used_memory_mib": 3_000}])
        await wait_for(lambda: (v := leftovers_of(monitor, workers[0])) is not None and v.leftovers.count == 2
                       and v.leftovers.gpu_memory_bytes == 15_000 * MIB, 30, what="the leftovers")
        views = [v for v in monitor.tracker.views() if set(workers) & ({*v.pids} | {*(v.leftovers.pids if
                                                                                    v.leftovers else ())})]
        assert [v.id for v in views] == [view.id]  # the job's leftovers, not a job of their own
        [entry] = [j for j in monitor.snapshot()["jobs"] if j["id"] == view.id]  # what `status --json` prints
        assert entry["alive"] is False  # its main process went
        left = entry["leftovers"]
        assert left["count"] == 2 and sorted(left["pids"]) == sorted(workers) and left["gpus"] == [0, 1]
        assert left["gpu_memory_bytes"] == 15_000 * MIB and left["since"] >= view.since

        report = render_report(monitor, leftovers_of(monitor, workers[0]), time.time())
        assert "## Leftovers" in report and all(f"{pid} S " in report for pid in workers), report
        assert "holding 14.6 GiB of GPU memory on GPU 0, 1" in report

        settings = ActionSettings(kill_grace_s=2.0, kill_wait_s=2.0)
        log = AuditLog(tmp_path / "audit.jsonl")
        with pytest.raises(ActionRefused, match="read-only"):
            ActionService(monitor, settings, log, True, "ana").plan(view.id, "reap")
        assert all(not gone(pid) for pid in workers)
        service = ActionService(monitor, settings, log, False, "ana")
        plan = service.plan(view.id, "reap")
        assert sorted((t.pid, t.role) for t in plan.targets) == sorted((pid, "leftover") for pid in workers)
        assert "15.6 GiB" not in plan.text() and "14.6 GiB on GPU 0, 1" in plan.text()
        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        assert {o.pid for o in outcome.report.outcomes} == set(workers)
        await wait_for(lambda: all(gone(pid) for pid in workers), 10, what="the workers gone")
        entries = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
        assert [(e["action"], e["result"].split(":")[0]) for e in entries] == [
            ("reap", "refused"), ("reap", "started"), ("reap", "done")]
        await wait_for(lambda: leftovers_of(monitor, workers[0]) is None, 30, what="no leftovers any more")
    finally:
        await monitor.stop()
        stop(job, workers)


def test_a_fresh_gpuwatch_finds_an_orphaned_worker_and_reaps_it(sshd_factory, ssh_env, tmp_path):
    (host,) = sshd_factory(1)
    job, [worker] = start_job(tmp_path, 1)
    try:
        os.kill(job.pid, signal.SIGKILL)
        job.wait(5)
        host.set_scenario(gpus=1, phase="held", uuid_prefix=f"GPU-{host.name}",
                          processes=[{"gpu": 0, "pid": worker, "used_memory_mib": 9_000}])
        cfg = tmp_path / "hosts.toml"
        lines = ["[settings]"] + [f"{k} = {toml_value(v)}" for k, v in settings_for(ssh_env).items()]
        lines += ["", "[actions]", 'kill_grace = "1s"', "", "[[hosts]]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in host_entry(host).items()]
        cfg.write_text("\n".join(lines) + "\n")

        def run(*args):
            return subprocess.run(gpuwatch(*args, "--config", str(cfg)), capture_output=True, text=True,
                                  env=env_for(tmp_path), stdin=subprocess.DEVNULL, timeout=90)

        r = run("status", "--json")
        assert r.returncode == 0, r.stderr
        [entry] = [j for j in json.loads(r.stdout)["jobs"] if worker in j.get("leftovers", {}).get("pids", ())]
        assert entry["leftovers"]["gpu_memory_bytes"] == 9_000 * MIB and entry["leftovers"]["count"] == 1
        r = run("status")
        assert f"leftovers: 1 process (pids {worker}) holds 8.8 GiB on GPU 0" in r.stdout, r.stdout
        assert f"gpuwatch reap {host.name} " in r.stdout
        name = entry["name"]
        r = run("reap", host.name, name, "--yes", "--readonly")
        assert r.returncode == 2 and "read-only" in r.stderr and not gone(worker)
        r = run("reap", host.name, name, "--yes", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        outcome = json.loads(r.stdout.strip().splitlines()[-1])
        assert [t["pid"] for t in outcome["plan"]["targets"]] == [worker] and outcome["status"] == "done"
        deadline = time.monotonic() + 10
        while not gone(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(worker)
        assert [e["result"].split(":")[0] for e in audit(tmp_path)] == ["refused", "started", "done"]
    finally:
        stop(job, [worker])


def start_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


async def test_a_kill_that_leaves_a_process_behind_is_partial_and_follows_it_as_a_leftover(
        sshd_factory, ssh_env, tmp_path):
    """The probe's kill reports a process it could not end (one the job forked while being killed that the
    kernel keeps, state D: a real sleeper stands for it, its outcome added to the real kill's reply). The
    kill is partial, names it, and the engine follows it as the job's leftover though it never saw it."""
    (host,) = sshd_factory(1)
    job, workers = start_job(tmp_path, 1)
    stuck = subprocess.Popen([PY, "-c", "import time\nwhile True:\n    time.sleep(1)"], stdin=subprocess.DEVNULL,
                             start_new_session=True)
    host.set_scenario(gpus=1, phase="training", uuid_prefix=f"GPU-{host.name}",
                      processes=[{"gpu": 0, "pid": job.pid, "used_memory_mib": 40_000}])
    monitor = Monitor(make_config(ssh_env, [host_entry(host)]))
    await monitor.start()
    try:
        await wait_for(lambda: (s := monitor.last_samples.get(host.name)) is not None and job.pid in s.procs
                       and workers[0] in {c.pid for c in s.procs[job.pid].children}, 30, what="the job")
        await wait_for(lambda: any(job.pid in v.pids for v in monitor.tracker.views()), 30, what="its view")
        [view] = [v for v in monitor.tracker.views() if job.pid in v.pids]
        real_request = monitor.request

        async def request(host_name, op, args=None, timeout=30.0):
            reply = await real_request(host_name, op, args, timeout)
            if op == "kill_tree":
                stays = {"pid": stuck.pid, "start_ticks": start_ticks(stuck.pid), "outcome": "survived",
                         "role": "child", "message": "still there 2.0 s after SIGKILL (state D, or stuck in the kernel)"}
                reply = {**reply, "results": [*reply["results"], stays]}
            return reply

        monitor.request = request
        service = ActionService(monitor, ActionSettings(kill_grace_s=2.0, kill_wait_s=2.0),
                                AuditLog(tmp_path / "audit.jsonl"), False, "ana")
        outcome = await service.execute(service.plan(view.id, "kill"))
        assert outcome.status == "partial" and not outcome.ok  # the CLI's exit code 1, not `done`
        assert f"left behind: 1 process {stuck.pid} (survived)" in "\n".join(outcome.summary())
        await wait_for(lambda: gone(job.pid) and gone(workers[0]), 10, what="the job's own processes gone")
        await wait_for(lambda: leftovers_of(monitor, stuck.pid) is not None, 30, what="the survivor as a leftover")
        [entry] = [j for j in monitor.snapshot()["jobs"] if j["id"] == view.id]
        assert entry["leftovers"]["pids"] == [stuck.pid] and entry["alive"] is False
    finally:
        await monitor.stop()
        stuck.kill()
        stuck.wait(5)
        stop(job, workers)

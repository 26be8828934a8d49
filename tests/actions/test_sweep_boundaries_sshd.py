"""A sweep driver end to end over a real sshd host and the real Monitor: a plain Python driver that starts three
training runs with subprocess.Popen gives three jobs; the kill plan of one names that run only, the kill
leaves the driver and the other runs alive, and its restart would re-run that run, not the sweep. A [[jobs]]
entry that matches the driver makes the driver-level job: one job, and its kill plan takes the sweep down."""

from __future__ import annotations

import subprocess

import psutil
import pytest

from tests.actions.test_service_sshd import gone, monitor_for, service_for, view
from tests.core.helpers import wait_for
from tests.jobs.boundary_support import DRIVERS, PY, Started, clean_env, needs_torch, wait_file

pytestmark = [needs_torch, pytest.mark.timeout(180)]


@pytest.fixture
def started():
    s = Started()
    yield s
    s.stop()


def start_sweep(tmp_path, started, lrs=("0.1", "0.2", "0.3")):
    with open(tmp_path / "sweep.log", "wb") as log:
        driver = subprocess.Popen([PY, str(DRIVERS / "sweep_popen.py"), str(tmp_path / "runs.txt"), *lrs],
                                  cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=clean_env(), start_new_session=True)
    started.track(driver.pid)
    runs = [int(p) for p in wait_file(tmp_path / "runs.txt")]
    for pid in runs:
        started.track(pid)
    return driver, runs


def root_of(monitor, pid):
    return next((v for v in monitor.tracker.views() if v.alive and v.root is not None and v.root.pid == pid), None)


async def test_one_run_of_a_sweep_is_killed_alone(sshd_factory, ssh_env, tmp_path, started):
    (host,) = sshd_factory(1)
    driver, runs = start_sweep(tmp_path, started)
    monitor = monitor_for(ssh_env, host, [])
    await monitor.start()
    try:
        await wait_for(lambda: all(root_of(monitor, r) for r in runs), 90, what="each run a job of its own")
        jobs = [root_of(monitor, r) for r in runs]
        assert [j.name for j in jobs] == ["train_standin.py"] * 3 and len({j.id for j in jobs}) == 3
        assert not [v for v in monitor.tracker.views() if driver.pid in v.pids]
        service = service_for(monitor, tmp_path)
        victim = jobs[1]
        plan = service.plan(victim.id, "kill")
        assert plan.pids == (runs[1],), plan.pids
        await wait_for(lambda: service.facts_ready(victim.id), 30, what="restart facts read")
        restart = service.plan(victim.id, "restart_unbuffered")
        assert "train_standin.py" in restart.command and "sweep_popen.py" not in restart.command
        assert restart.pids == (runs[1],)

        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        assert {o.pid for o in outcome.report.outcomes if o.signalled} == {runs[1]}
        await wait_for(lambda: gone(runs[1]), 10, what="the killed run gone")
        await wait_for(lambda: not view(monitor, victim.id).alive, 20, what="the killed run's job ended")
        assert driver.poll() is None and not gone(driver.pid), "the driver went down with one run"
        assert not gone(runs[0]) and not gone(runs[2]), "a sibling run went down"
        assert view(monitor, jobs[0].id).alive and view(monitor, jobs[2].id).alive
    finally:
        await monitor.stop()


async def test_a_jobs_entry_on_the_driver_is_one_driver_level_job(sshd_factory, ssh_env, tmp_path, started):
    (host,) = sshd_factory(1)
    driver, runs = start_sweep(tmp_path, started, lrs=("0.1", "0.2"))
    monitor = monitor_for(ssh_env, host, [{"name": "lr-sweep", "match": "sweep_popen\\.py"}])
    await monitor.start()
    try:
        await wait_for(lambda: (v := view(monitor, "cfg0")) is not None and v.alive and driver.pid in v.pids
                       and monitor.tracker.procs("cfg0"), 60, what="the configured sweep job")
        service = service_for(monitor, tmp_path)
        # (a frame or two for the runs' torch to load: they never become jobs of their own)
        await wait_for(lambda: all(psutil.Process(r).memory_info().vms > 256 << 20 for r in runs), 60,
                       what="the runs loaded torch")
        for _ in range(3):
            await monitor_frames(monitor, host.name, 2)
            assert [v.name for v in monitor.tracker.views() if set(runs) & set(v.pids) or driver.pid in v.pids] \
                == ["lr-sweep"]
        plan = service.plan("cfg0", "kill")
        assert set(plan.pids) == {driver.pid, *runs}
        outcome = await service.execute(plan)
        assert outcome.ok, outcome.summary()
        for pid in (driver.pid, *runs):
            await wait_for(lambda: gone(pid), 10, what=f"{pid} gone")
    finally:
        await monitor.stop()


async def monitor_frames(monitor, host: str, n: int) -> None:
    """Until the host has sent `n` more frames."""
    start = monitor.last_samples.get(host)
    seen = [start]

    def moved():
        now = monitor.last_samples.get(host)
        if now is not seen[-1]:
            seen.append(now)
        return len(seen) > n

    await wait_for(moved, 30, what=f"{n} frames from {host}")

"""Two gpuwatch instances watch one real sshd host; one acts, the other only watches. The action leaves a record
on the host (probe/action_notes.py) that both read: the kill reads `crashed (killed by USER via gpuwatch)` in
both, and the run a restart started ends with its wrapper's exit status in the watcher too."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from tests.actions import test_service_sshd as sshd_tests
from tests.actions.test_service_sshd import PY, SCRIPTS, USER, gone, live_job, monitor_for, service_for, start_tree, view
from tests.core.helpers import wait_for

procs = sshd_tests.procs  # (the fixture: processes the test started, killed by pid at its end)


def records(host) -> list[Path]:
    return sorted((Path(host.home) / ".local" / "state" / "gpuwatch" / "actions").glob("*.json"))


async def test_a_kill_by_one_instance_reads_killed_by_user_in_both(sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    tree = start_tree(tmp_path, started)
    everyone = [tree["launcher"], *tree["workers"], *tree["grandchildren"]]
    extra += everyone
    job_cfg = [{"name": "trainer", "match": str(tmp_path / "tree-pids")}]
    acting, watching = monitor_for(ssh_env, host, job_cfg), monitor_for(ssh_env, host, job_cfg)
    await acting.start()
    await watching.start()
    try:
        job = await live_job(acting, "cfg0")
        await live_job(watching, "cfg0")
        service = service_for(acting, tmp_path)
        outcome = await service.execute(service.plan(job.id, "kill"))
        assert outcome.ok and not outcome.warnings, (outcome.summary(), outcome.warnings)
        for pid in everyone:
            await wait_for(lambda: gone(pid), 5, what=f"{pid} gone")
        for monitor in (acting, watching):
            await wait_for(lambda: not view(monitor, "cfg0").alive, 15, what="job ended")
            ended = view(monitor, "cfg0")
            assert (ended.phase, ended.detail) == ("crashed", "killed"), ended
            assert ended.evidence[0].startswith(f"killed by {USER} via gpuwatch at "), ended.evidence
            assert ended.to_json()["events"] == [ended.evidence[0]]  # the host's record is this instance's own
        [record] = records(host)
        mode = os.stat(record).st_mode
        assert stat.S_IMODE(mode) == 0o600 and stat.S_IMODE(os.stat(record.parent).st_mode) == 0o700
    finally:
        await acting.stop()
        await watching.stop()


async def test_a_restart_by_one_instance_ends_with_the_wrappers_exit_status_in_the_other(
        sshd_factory, ssh_env, tmp_path, procs):
    started, extra = procs
    (host,) = sshd_factory(1)
    work = tmp_path / "work"
    work.mkdir()
    script = work / "train_buffered.py"
    shutil.copy(SCRIPTS / "buffered_job.py", script)
    log = work / "train.log"
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    with open(log, "wb") as out:
        old = subprocess.Popen([PY, str(script)], cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    started.append(old)
    job_cfg = [{"name": "buffered", "match": str(script), "logs": [str(log)]}]
    acting, watching = monitor_for(ssh_env, host, job_cfg), monitor_for(ssh_env, host, job_cfg)
    await acting.start()
    await watching.start()
    try:
        job = await live_job(acting, "cfg0")
        await live_job(watching, "cfg0")
        service = service_for(acting, tmp_path)
        await wait_for(lambda: service.facts_ready(job.id), 10, what="restart facts captured at discovery")
        outcome = await service.execute(service.plan(job.id, "restart_unbuffered"))
        assert outcome.ok, outcome.summary()
        new_pid = outcome.report.pid
        extra.append(new_pid)
        await wait_for(lambda: (v := view(watching, "cfg0")) is not None and v.alive and new_pid in v.pids, 20,
                       what="the watcher follows the new run")
        (work / "stop").write_text("")
        for monitor in (acting, watching):
            who = "the instance that restarted" if monitor is acting else "the one that watched"
            try:
                await wait_for(lambda: view(monitor, "cfg0").exit_code == 3, 45, what=f"the wrapper's exit code in {who}")
            except AssertionError as exc:
                v = view(monitor, "cfg0")
                sample = monitor.last_samples.get(host.name)
                seen = sample.procs.get(new_pid) if sample is not None else None
                raise AssertionError(f"{exc}: new={new_pid} seen={seen!r} matches={getattr(sample, 'matches', None)} "
                                     f"{v.phase} {v.detail} exit={v.exit_code} pids={v.pids} "
                                     f"evidence={v.evidence} jobs={[(j.id, j.phase) for j in monitor.tracker.views()]}")
            assert view(monitor, "cfg0").pids == (new_pid,), [(v.id, v.pids) for v in monitor.tracker.views()]
            final = view(monitor, "cfg0").to_json()
            assert final["exit_code"] == 3 and final["phase"] == "crashed", final
            assert not any("exit status unknown" in e for e in final["evidence"]), final["evidence"]
        actions = sorted(r.read_text() for r in records(host))
        assert len(actions) == 2 and any('"restart_unbuffered"' in a for a in actions) and any(
            '"run_started"' in a for a in actions), actions
    finally:
        await acting.stop()
        await watching.stop()

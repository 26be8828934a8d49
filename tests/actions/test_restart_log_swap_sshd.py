"""A restart never writes into a file that was swapped in for the job's log after discovery.

A real job on a real sshd host writes `train.log`; once its restart facts are captured, the log is moved
away and `train.log` becomes a symlink to a precious file (or another file is put in its place). The
restart, in append and in rotate mode, is refused with a clear message before anything is signalled: the
old run goes on, the precious file is byte for byte unchanged, nothing is rotated. With the log left as it
was, the same restart works (the marker and the new run go into the real log).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.actions.test_service_sshd import gone, monitor_for, procs, service_for  # noqa: F401
from tests.core.helpers import wait_for

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
JOB = "import sys, time\nwhile True:\n    print('step', flush=True)\n    time.sleep(0.5)\n"


async def start_watched_job(sshd_factory, ssh_env, tmp_path, procs, mode: str):
    started, extra = procs
    (host,) = sshd_factory(1)
    work = tmp_path / "work"
    work.mkdir()
    (work / "swap_job.py").write_text(JOB)
    log = work / "train.log"
    with open(log, "wb") as out:
        old = subprocess.Popen([PY, str(work / "swap_job.py"), f"swap-marker-{mode}"], cwd=work,
                               stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    started.append(old)
    monitor = monitor_for(ssh_env, host, [{"name": "swapper", "match": f"swap-marker-{mode}"}])
    await monitor.start()
    job_id = None

    def find():
        nonlocal job_id
        job = next((v for v in monitor.tracker.views() if old.pid in v.pids), None)
        job_id = job.id if job else None
        return job_id is not None

    await wait_for(find, 30, what="the job discovered")
    service = service_for(monitor, tmp_path, restart_log_mode=mode)
    await wait_for(lambda: service.facts_ready(job_id), 15, what="restart facts captured at discovery")
    return monitor, service, job_id, old, log, extra


@pytest.mark.ssh
@pytest.mark.parametrize("mode", ["append", "rotate"])
@pytest.mark.parametrize("swap", ["symlink", "other-file"])
async def test_a_swapped_log_is_refused_before_anything_is_signalled(sshd_factory, ssh_env, tmp_path, procs,
                                                                     mode, swap):
    monitor, service, job_id, old, log, extra = await start_watched_job(sshd_factory, ssh_env, tmp_path, procs, mode)
    try:
        precious = tmp_path / "precious"
        precious.write_bytes(b"keep me\n")
        os.rename(log, log.with_name("moved.log"))
        if swap == "symlink":
            os.symlink(precious, log)
        else:
            log.write_bytes(b"someone else's file\n")
        swapped_in = log.read_bytes()
        plan = service.plan(job_id, "restart_unbuffered")
        outcome = await service.execute(plan)
        assert not outcome.ok
        words = "\n".join(outcome.summary())
        assert "refusing to write to the job's log" in words, words
        assert ("is now a symbolic link" in words) if swap == "symlink" else ("another file" in words), words
        assert old.poll() is None, "the old run was signalled although the restart was refused"
        assert precious.read_bytes() == b"keep me\n"
        assert log.read_bytes() == swapped_in
        assert not log.with_name("train.log.1").exists() and not log.with_name("precious.1").exists()
        assert outcome.report.kill is None
    finally:
        await monitor.stop()


@pytest.mark.ssh
@pytest.mark.parametrize("mode", ["append", "rotate"])
async def test_the_same_restart_works_when_the_log_is_untouched(sshd_factory, ssh_env, tmp_path, procs, mode):
    monitor, service, job_id, old, log, extra = await start_watched_job(sshd_factory, ssh_env, tmp_path, procs, mode)
    try:
        outcome = await service.execute(service.plan(job_id, "restart_unbuffered"))
        assert outcome.ok, outcome.summary()
        extra.append(outcome.report.pid)
        assert gone(old.pid)
        await wait_for(lambda: b"gpuwatch: restarted with -u" in log.read_bytes(), 10, what="the marker in the log")
        await wait_for(lambda: log.read_bytes().rstrip().endswith(b"step"), 10, what="the new run writing the log")
        assert log.with_name("train.log.1").exists() == (mode == "rotate")
    finally:
        await monitor.stop()

"""A full disk or an unwritable state dir: the audit log, incident reports and py-spy dumps fail
with a clear message, and the watch goes on (samples keep arriving, the job is still tracked).

"Full" is a real 4 KiB tmpfs filled up (skipped where mounting is not allowed); "unwritable" is
a state dir under a regular file, which stops root too (chmod does not).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch_tui.actions.audit import AuditError, AuditLog
from gpuwatch_tui.actions.dump import DumpFailed, DumpReport, save_report
from gpuwatch_tui.actions.stack_analysis import analyse
from gpuwatch_tui.config import parse_config
from gpuwatch_tui.incident_report import ReportError, write_report
from gpuwatch_tui.monitor import Monitor
from tests.core.helpers import wait_for


@pytest.fixture
def full_dir(tmp_path):
    """A directory on a 4 KiB tmpfs that is already full."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"x" * 512):
                pass
        except OSError:
            pass  # ENOSPC: full
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.fixture
def unwritable_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    return blocker / "state"


def _dump_report() -> DumpReport:
    return DumpReport(host="h1", job="train", taken_at=time.time(), pyspy="/usr/bin/py-spy", pyspy_source="host",
                      processes=[], analysis=analyse([]))


@pytest.mark.parametrize("where", ["full_dir", "unwritable_dir"])
async def test_state_dir_faults_give_clear_errors_and_the_watch_goes_on(where, request, tmp_path):
    bad = request.getfixturevalue(where)
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    tag = f"gpuwatch-full-disk-{os.getpid()}"
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag])
    cfg = parse_config({"settings": {"sample_interval": 0.2},
                        "hosts": [{"name": "me", "local": True}],
                        "jobs": [{"name": "train", "host": "me", "match": tag, "log": str(log)}]}, "t.toml")
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await wait_for(lambda: any(v.name == "train" for v in monitor.tracker.views()), 20, what="the job")
        why = "disk is full" if where == "full_dir" else "Not a directory"
        with pytest.raises(AuditError, match=f"cannot write the audit log .*{why}"):
            AuditLog(bad / "audit.jsonl").record(host="me", job="train", action="kill", pids=[job.pid],
                                                  command="kill -TERM", result="done")
        with pytest.raises(ReportError, match="cannot write the report in .*(No space left|Not a directory)"):
            write_report(monitor, "me", "train", bad / "reports")
        with pytest.raises(DumpFailed, match="cannot be saved in .*(No space left|Not a directory)"):
            save_report(_dump_report(), bad / "dumps")
        if where == "full_dir":
            # no torn files: nothing half-written (an audit log opened but not written stays empty)
            left = {p.name: p.stat().st_size for p in Path(bad).rglob("*") if p.is_file()}
            assert {k: v for k, v in left.items() if k != "filler" and v} == {}, left
            assert not [k for k in left if k.endswith(".tmp")], left
        # nothing else broke: samples still arrive, the job is still there, a good dir works
        n = monitor.store.hosts["me"].last_sample_time
        await wait_for(lambda: monitor.store.hosts["me"].last_sample_time != n, 5, what="samples go on")
        assert monitor.store.hosts["me"].state == "connected"
        assert write_report(monitor, "me", "train", tmp_path / "ok").is_file()
        assert save_report(_dump_report(), tmp_path / "ok-dumps").is_file()
    finally:
        await monitor.stop()
        job.kill()
        job.wait()

"""`write_report` over a real sshd host and a real process with a hostile log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.incident_report import ReportError, fenced, sparkline, write_report
from gpuwatch_tui.monitor import Monitor
from tests.core.helpers import host_entry, settings_for, wait_for


def test_fence_outlasts_backticks_and_sparkline_gaps():
    text = fenced(["a ```` b", "```"])
    assert text.startswith("`````text\n") and text.endswith("\n`````")
    assert sparkline([0, None, 50, 100], 100) == "▁·▅█"


async def test_report_of_a_real_job_with_a_hostile_log(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1 loss 2.0\n```\nx\x1b]0;pwned\x07 \x1b[31mred\x1b[0m <script>\n" + b"\xff\xfe bad utf8\n")
    tag = f"gpuwatch-report-test-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", "import time,sys; time.sleep(60)", tag])
    try:
        cfg = parse_config({"settings": settings_for(ssh_env), "hosts": [host_entry(host)],
                            "jobs": [{"name": "train", "host": host.name, "match": tag, "log": str(log)}]}, "t.toml")
        monitor = Monitor(cfg)
        await monitor.start()
        try:
            await wait_for(lambda: any(v.name == "train" and v.log_lines >= 3 for v in monitor.tracker.views()),
                           20, what="the job and its log")
            path = write_report(monitor, host.name, "train", tmp_path / "reports")
            [view] = [v for v in monitor.tracker.views() if v.name == "train"]
            with pytest.raises(ReportError, match="no job 'nope'"):
                write_report(monitor, host.name, "nope", tmp_path / "reports")
            ro = tmp_path / "ro"
            ro.mkdir()
            ro.chmod(0o500)
            if os.geteuid() != 0:
                with pytest.raises(ReportError, match="cannot write the report in"):
                    write_report(monitor, host.name, "train", ro / "sub")
        finally:
            await monitor.stop()
    finally:
        proc.kill()
        proc.wait()
    text = path.read_text()
    assert path.suffix == ".md" and text.startswith(f"# Incident: {view.short_id} train on {host.name}")
    assert path.name.startswith(f"{host.name}_{view.short_id}_train_")
    assert "## Verdict" in text and "### Phase history" in text and "## Processes" in text and "## Host" in text
    assert "\x1b" not in text and "\x07" not in text
    assert "````text\nstep 1 loss 2.0\n```\n" in text  # the log's own ``` stays inside a longer fence
    assert tag in text  # the process tree names the matched process

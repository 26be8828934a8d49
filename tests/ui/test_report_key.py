"""`e`: the selected job's incident report, from the job pane (and `E`, its incident bundle). Over the live core (a real Monitor,
a real sshd host on loopback, a real job process) the file is written and its path shown; a
directory that cannot be written, and a recording, are refused in words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.screens.job_screen import JobScreen

from tests.core.helpers import host_entry, settings_for

from .helpers import notifications

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


async def until(pilot, test, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; toasts: {notifications(pilot.app)}")
        await pilot.pause(0.1)


def report_toasts(app) -> list:
    return [n for n in app._notifications if n.title.startswith("incident report")]


async def test_e_in_a_live_job_pane_writes_the_report_and_shows_its_path(sshd_factory, ssh_env, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    script = tmp_path / "live_trainer.py"
    script.write_text("import time\nfor i in range(10**6):\n    print(f'step {i} loss 0.5', flush=True)\n"
                      "    time.sleep(0.2)\n")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        job = subprocess.Popen([PY, str(script)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        (host,) = sshd_factory(1)
        config = parse_config({"settings": settings_for(ssh_env), "hosts": [host_entry(host)],
                               "jobs": [{"name": "trainer", "match": str(script), "host": host.name}]}, "t.toml")
        source = MonitorSource(Monitor(config))
        app = GpuwatchApp(source, min_refresh_interval=0, readonly=True)  # a report changes nothing on a host
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: any(j.name == "trainer" and j.alive and j.pids for j in source.jobs()), 30,
                        "the job seen alive")
            view = next(j for j in source.jobs() if j.name == "trainer")
            app.open_job(view.id)
            await pilot.pause()
            assert isinstance(app.screen, JobScreen)
            await pilot.press("e")
            await until(pilot, lambda: report_toasts(app), 15, "the report toast")
            toast = report_toasts(app)[0]
            assert toast.severity == "information", toast.message
            path = Path(toast.message.removeprefix("written to "))
            assert path.parent == tmp_path / "state" / "gpuwatch" / "reports" and path.is_file()
            text = path.read_text()
            assert view.short_id and text.startswith(f"# Incident: {view.short_id} trainer on {host.name}")
            assert path.name.startswith(f"{host.name}_{view.short_id}_trainer_")
            assert str(job.pid) in text and "## Log" in text
            assert isinstance(app.screen, JobScreen)  # the person stays where they were

            await pilot.press("E")  # the incident bundle: one zip holding the report and what it was made of
            await until(pilot, lambda: len(report_toasts(app)) == 2, 15, "the bundle toast")
            toast = report_toasts(app)[1]
            assert toast.severity == "information", toast.message
            bundle = Path(toast.message.removeprefix("written to "))
            assert bundle.name.endswith(".gpuwatch-bundle.zip") and bundle.parent == path.parent
            with zipfile.ZipFile(bundle) as z:
                manifest = json.loads(z.read("manifest.json"))
                assert manifest["job"] == "trainer" and manifest["job_id"] == view.id
                assert z.read("report.md").decode().startswith(f"# Incident: {view.short_id} trainer on {host.name}")
                assert manifest["short_id"] == view.short_id

            blocked = tmp_path / "not-a-dir"
            blocked.write_text("a file where the state dir should be")
            monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
            await pilot.press("e")
            await until(pilot, lambda: len(report_toasts(app)) == 3, 15, "the second report toast")
            refused = report_toasts(app)[2]
            assert refused.severity == "error"
            assert refused.message.startswith("cannot write the report in ") and str(blocked) in refused.message
            await source.stop()
    finally:
        job.kill()
        job.wait(5)


async def test_e_on_a_recording_is_refused_politely(app, source):
    async with app.run_test(size=(120, 40)) as pilot:
        job = source.jobs()[0]
        app.open_job(job.id)
        await pilot.pause()
        await pilot.press("e")
        await until(pilot, lambda: report_toasts(app), 5, "the refusal")
        [toast] = report_toasts(app)
        assert toast.severity == "error" and "replays a recording" in toast.message
        assert job.name in toast.title


"""`k` in the dashboard over the live core: a MonitorSource over a real Monitor watching a real sshd
host on loopback, a real configured job process, the real action service; confirming kills it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.action_outcome import ActionOutcomeTable

from tests.core.helpers import host_entry, settings_for

from .helpers import notifications, static_text

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _service_module():
    try:
        from gpuwatch_tui.actions import service
    except ImportError:
        return None
    return service if hasattr(service, "ActionService") else None  # not the dialog tests' stand-in


pytestmark = pytest.mark.skipif(_service_module() is None or not hasattr(MonitorSource, "plan_action"),
                                reason="the action service is not in this tree yet")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def until(pilot, test, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; toasts: {notifications(pilot.app)}")
        await pilot.pause(0.1)


async def test_k_y_on_a_live_job_kills_its_process_and_shows_the_outcome(sshd_factory, ssh_env, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the audit log goes here
    script = tmp_path / "live_trainer.py"
    script.write_text("import time\nwhile True:\n    time.sleep(0.2)\n")
    job = subprocess.Popen([PY, str(script)], start_new_session=True)
    try:
        (host,) = sshd_factory(1)
        config = parse_config({"settings": settings_for(ssh_env), "hosts": [host_entry(host)],
                               "jobs": [{"name": "trainer", "match": str(script), "host": host.name}]}, "t.toml")
        source = MonitorSource(Monitor(config))
        app = GpuwatchApp(source, min_refresh_interval=0)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: any(j.name == "trainer" and j.alive and j.pids for j in source.jobs()), 30,
                        "the job seen alive")
            view = next(j for j in source.jobs() if j.name == "trainer")
            app.open_job(view.id)
            await pilot.pause()
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmActionScreen), 5, "the confirm dialog")
            text = "\n".join(static_text(w) for w in app.screen.query(".confirm-target, #confirm-facts, #confirm-command"))
            assert host.name in text and "trainer" in text and str(job.pid) in text
            assert psutil.Process().username() in text and str(script) in text and "SIGKILL" in text
            await pilot.press("escape")
            await pilot.pause(0.5)
            assert alive(job.pid)  # cancelled: nothing was sent

            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmActionScreen), 5, "the confirm dialog")
            await pilot.press("y")
            await until(pilot, lambda: not app.running_actions and view.id in app.action_outcomes, 30, "the outcome")
            job.wait(5)
            assert not alive(job.pid)
            assert isinstance(app.screen, JobScreen)
            shown = static_text(app.screen.query_one(ActionOutcomeTable))
            assert f"{job.pid}" in shown and "exited" in shown
            assert any("kill trainer on" in n for n in notifications(app))
            await source.stop()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(5)

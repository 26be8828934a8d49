"""Alerts in the dashboard: the app built as `gpuwatch` builds it, over a real Monitor watching a
real sshd host on loopback; a configured job crashes for real and its alert shows as a toast."""

from __future__ import annotations

import time

from gpuwatch_tui.config import load_config
from gpuwatch_tui.ui.run import build_app

from tests.e2e.harness import launch, write_config

from .helpers import notifications


async def until(pilot, test, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; toasts: {notifications(pilot.app)}")
        await pilot.pause(0.1)


def alert_toasts(app) -> list:
    return [n for n in app._notifications if n.title == "gpuwatch alert"]


async def test_a_configured_job_that_crashes_raises_one_toast_and_quit_stops_the_alerts(
        sshd_factory, ssh_env, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    [host] = sshd_factory(1)
    run_dir = tmp_path / "run"
    script = run_dir / "crash_traceback.py"
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host],
                       jobs=[{"name": "trainer", "host": host.name, "match": str(script), "alerts": ["crashed"]}])
    config = load_config(str(cfg))
    assert config.alerts.enabled
    host.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{host.name}")
    app = build_app(config, min_refresh_interval=0)
    source = app.source
    run = None
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: source.monitor is not None
                        and source.monitor.store.hosts[host.name].state == "connected", 30, "connected")
            assert source.alerts is not None, "[alerts] rules are configured: the runner must run"
            run = launch(ssh_env, host, run_dir, "crash_traceback.py", "--steps", "12", "--step-time", "0.5")
            await until(pilot, lambda: any(j.name == "trainer" for j in source.jobs()), 30,
                        "the configured job seen")
            jobs = [(j.name, j.phase, j.alive) for j in source.jobs()]
            assert alert_toasts(app) == [], jobs  # a live, training job raises nothing
            await until(pilot, lambda: alert_toasts(app), 60, "the crash toast")
            await pilot.pause(3)  # more samples of the crashed job: still one toast
            toasts = alert_toasts(app)
            assert len(toasts) == 1, [t.message for t in toasts]
            assert "trainer" in toasts[0].message and toasts[0].severity == "error"
            assert [e.trigger for e in source.alerts.fired] == ["crashed"]
            assert all(d.ok and d.sink == "toast" for d in source.alerts.dispatcher.deliveries)
            runner = source.alerts
            await pilot.press("q")
            await pilot.pause(0.5)
            assert source.alerts is None and runner._task.done(), "quit must stop the alerts"
    finally:
        if run is not None:
            run.stop()


async def test_without_alert_rules_no_runner_starts(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    config = load_config(str(write_config(tmp_path / "gpuwatch.toml", ssh_env, [host])))
    host.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{host.name}")
    app = build_app(config, min_refresh_interval=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.source.monitor is not None
                    and app.source.monitor.store.hosts[host.name].state == "connected", 30, "connected")
        assert app.source.alerts is None
        await app.source.stop()

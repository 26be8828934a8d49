"""A Slurm job that starts while the dashboard runs gets its node watched and its log tailed; `k` on it offers scancel (not signals to pids): the confirm dialog shows the
scancel command, and `y` ends the job in Slurm. Real Slurm, the job's node watched over a real sshd."""

from __future__ import annotations

import asyncio

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen

from tests.core.helpers import settings_for
from tests.ui.helpers import notifications, static_text

from .cluster import NODE


async def until(pilot, test, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not test():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; toasts: {notifications(pilot.app)}")
        await pilot.pause(0.1)


async def test_k_on_a_slurm_job_is_scancel(slurm_env, sshd_factory, ssh_env, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the audit log goes here
    c = slurm_env
    (node,) = sshd_factory(1)
    running = None
    try:
        config = parse_config({
            "settings": settings_for(ssh_env),
            "slurm": {"login": "local", "user": "root", "poll_interval": "1s", "node_jump": "none",
                      "node_address": {NODE: node.name}},
        }, "t.toml")
        source = MonitorSource(config=config)
        app = GpuwatchApp(source, min_refresh_interval=0)
        async with app.run_test(size=(140, 40)) as pilot:
            await until(pilot, lambda: source.slurm is not None and source.slurm.watch.polls >= 1, 10, "a queue read")
            assert NODE not in source.store.hosts
            # The job starts while the dashboard runs: its node and its batch script are watched from then on.
            running = c.sbatch("--job-name=train", "--time=5", "-o", "train-%j.log",
                               script="while true; do echo tick; sleep 0.5; done")
            c.wait_state(running, {"RUNNING"})
            name = f"slurm-{running}"
            await until(pilot, lambda: any(j.name == name and j.alive and j.pids for j in source.jobs()), 40,
                        "the Slurm job seen alive on its node")
            view = next(j for j in source.jobs() if j.name == name)
            assert view.host == NODE and source.store.hosts[NODE].state == "connected"
            # The log Slurm names is the one tailed.
            await until(pilot, lambda: "tick" in "\n".join(source.job_log(view.id)), 15, "the job's log lines")
            app.open_job(view.id)
            await pilot.pause()
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmActionScreen), 5, "the confirm dialog")
            text = "\n".join(static_text(w) for w in app.screen.query("#confirm-targets-head, #confirm-command"))
            assert f"scancel -- {running}" in text and f"Slurm job {running} (RUNNING) on {NODE}" in text
            # The dialog says it is a cancel in Slurm, not signals to pids.
            assert "Kill (cancel with scancel)?" in static_text(app.screen.query_one("#confirm-title"))
            assert str(app.screen.query_one("#confirm-ok").label) == "scancel (y)"
            await pilot.press("y")
            await until(pilot, lambda: not app.running_actions and view.id in app.action_outcomes, 30, "the outcome")
            outcome = app.action_outcomes[view.id][0]
            assert outcome.ok, outcome.summary()
            assert c.wait_state(running, {"CANCELLED"}, 20) == "CANCELLED"
            await source.stop()
    finally:
        if running is not None:
            c.run(["scancel", running], check=False)

"""The real dashboard (GpuwatchApp over a MonitorSource over a Monitor) watching real sshd hosts,
and a clock for key -> frame latency. Shared by tests/faults/test_dashboard_under_faults.py and
benchmarks/bench_faults_dashboard.py, so the figure and the test measure the same thing.

Key -> frame: from the moment the key event is handed to the app (as the terminal driver does)
to the first frame the compositor produces in which the key's effect holds. Each frame is also
turned into terminal bytes, as the real driver would, so the cost of output is counted.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from typing import Callable

from textual import events

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.screens.dashboard import DashboardScreen
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.gpu_grid import GpuGrid
from gpuwatch_tui.ui.widgets.host_bar import HostBar
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable

from tests.core.helpers import settings_for

# A real fleet's rhythm (1 s samples, stale after 5 s) with a tight keepalive and reconnect cap.
SETTINGS = dict(sample_interval=1.0, stale_after=5.0, connect_timeout=2, keepalive_interval=2,
                keepalive_count_max=2, reconnect_initial_delay=0.2, reconnect_max_delay=1.0)
SIZE = (140, 50)  # tall enough that every host line of three hosts is on screen
JOB_TAG = "gpuwatch-faults-job"


def start_jobs(names: list[str]) -> list[subprocess.Popen]:
    """One idle process per host, its cmdline tagged with the host name. The test hosts share this
    machine's /proc, so each host's probe sees all three; each [[jobs]] entry matches its own."""
    return [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", f"{JOB_TAG}-{name}"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name in names]


def stop_jobs(jobs: list[subprocess.Popen]) -> None:
    for job in jobs:
        job.kill()
        job.wait()


def fleet_config(ssh_env, hosts: list[dict]):
    jobs = [{"name": f"train-{h['name']}", "host": h["name"], "match": f"{JOB_TAG}-{h['name']}$"} for h in hosts]
    return parse_config({"settings": settings_for(ssh_env, **SETTINGS), "hosts": hosts, "jobs": jobs},
                        "faults.toml")


class StateLog:
    """Every host state the Monitor was told, with its monotonic time (a state shorter than one
    redraw may never reach the screen; this says it happened)."""

    def __init__(self, monitor: Monitor) -> None:
        self.states: dict[str, list[tuple[float, str]]] = {n: [] for n in monitor.sessions}
        outer = self

        class Sink:
            def host_state(self, host, state, error, hint, retry_at=None):
                outer.states[host].append((time.monotonic(), state))
                monitor.host_state(host, state, error, hint, retry_at)

            def host_sample(self, host, sample):
                monitor.host_sample(host, sample)

        for session in monitor.sessions.values():
            session.sink = Sink()

    def since(self, name: str, t0: float) -> list[str]:
        return [s for t, s in self.states[name] if t > t0]


class FrameClock:
    """Times frames: `press(key, effect)` -> seconds from the key to the first frame showing it."""

    def __init__(self, app: GpuwatchApp) -> None:
        self.app = app
        self.frames = 0
        self.log: list[tuple[str, float, float]] = []  # (key, handled after, shown after)
        self._effect: Callable[[], bool] | None = None
        self._shown_at: float | None = None
        display = app._display

        def timed_display(screen, renderable):
            display(screen, renderable)
            if renderable is None:
                return
            render = getattr(renderable, "render_segments", None)
            if render is not None:
                render(app.console)  # the bytes a terminal would get
            self.frames += 1
            if self._effect is not None and self._shown_at is None and self._effect():
                self._shown_at = time.perf_counter()

        app._display = timed_display

    async def press(self, key: str, effect: Callable[[], bool], timeout: float = 10.0) -> float:
        assert not effect(), f"{key!r}: its effect already holds before the key"
        self._effect, self._shown_at = effect, None
        t0 = time.perf_counter()
        self.app._driver.send_message(events.Key(key, key if len(key) == 1 else None))
        self.handled_after = None  # when the key's effect first held in the app's state (polled)
        try:
            while self._shown_at is None:
                now = time.perf_counter()
                if self.handled_after is None and effect():
                    self.handled_after = now - t0
                if now - t0 > timeout:
                    raise AssertionError(f"no frame showed the effect of {key!r} within {timeout}s")
                await asyncio.sleep(0.001)
            if self.handled_after is None:
                self.handled_after = self._shown_at - t0
            self.log.append((key, self.handled_after, self._shown_at - t0))
            return self._shown_at - t0
        finally:
            self._effect = None


def grid(app) -> GpuGrid:
    return app.screen.query_one(GpuGrid)


def host_line(app, name: str) -> str:
    """The GPU grid's rendered header line of host `name` (as on screen)."""
    g = grid(app)
    for y in range(g.scrollable_content_region.height):
        text = g.render_line(y).text
        if text.startswith(f"▌{name} "):
            return text
    raise AssertionError(f"no line for {name} on the grid: "
                         + " | ".join(g.render_line(y).text for y in range(g.scrollable_content_region.height)))


def summary(app) -> str:
    return app.screen.query_one(HostBar).render().plain


def sample_ages(app, names) -> dict[str, float | None]:
    store, now = app.source.store, app.source.now()
    return {n: store.hosts[n].sample_age(now) for n in names}


async def key_round(app, clock: FrameClock, rounds: int) -> list[tuple[str, float]]:
    """`rounds` x (down, up, tab, shift+tab, enter, escape) on the dashboard, each checked on the
    screen; returns (key, latency) for every press. Starts and ends with the jobs table focused."""
    out: list[tuple[str, float]] = []
    for _ in range(rounds):
        table = app.screen.query_one(JobsTable)
        assert table.has_focus and table.row_count >= 2, (table.has_focus, table.row_count)
        start = table.cursor
        out.append(("down", await clock.press("down", lambda: table.cursor == start + 1)))
        out.append(("up", await clock.press("up", lambda: table.cursor == start)))
        out.append(("tab", await clock.press("tab", lambda: grid(app).has_focus)))
        out.append(("shift+tab", await clock.press("shift+tab", lambda: table.has_focus)))
        job = table.selected_job_id
        out.append(("enter", await clock.press("enter", lambda: isinstance(app.screen, JobScreen)
                                     and app.screen.job_id == job)))
        out.append(("escape", await clock.press("escape", lambda: isinstance(app.screen, DashboardScreen))))
        await asyncio.sleep(0.02)  # a person does not type faster than this
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def wait_screen(pilot, predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.05)


@asynccontextmanager
async def dashboard(ssh_env, hosts: list[dict]):
    """(app, pilot, state log, frame clock) with every host connected and every job on screen."""
    names = [h["name"] for h in hosts]
    jobs = start_jobs(names)
    try:
        monitor = Monitor(fleet_config(ssh_env, hosts))
        log = StateLog(monitor)
        app = GpuwatchApp(MonitorSource(monitor))
        async with app.run_test(size=SIZE) as pilot:
            clock = FrameClock(app)
            await wait_screen(pilot, lambda: f"{len(names)} connected" in summary(app), 20,
                              f"all connected: {summary(app)!r}")
            table = app.screen.query_one(JobsTable)
            await wait_screen(pilot, lambda: table.row_count == len(names), 20,
                              f"{len(names)} jobs in the table: {table.job_ids}")
            try:
                yield app, pilot, log, clock
            finally:
                await app.source.stop()
    finally:
        stop_jobs(jobs)

"""DashboardSource over the live core (monitor.Monitor): the adapter the real dashboard runs on."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Callable, TYPE_CHECKING

from ..alerts.triggers import RECORDING_RESUMED, RECORDING_STOPPED
from ..store import Store

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ..model import DirStat, ProcInfo
    from ..views import JobView


class MonitorSource:
    """Over a Monitor, or over a Config whose Monitor is built when `run()` starts.

    Building the Monitor (the job tracker, its rules) costs ~0.1 s: with a config it happens after
    the first frame, which meanwhile shows every configured host as "connecting".
    """

    def __init__(self, monitor=None, *, config=None) -> None:
        if (monitor is None) == (config is None):
            raise TypeError("MonitorSource needs a monitor or a config")
        self.monitor = monitor
        self._config = config
        self._subscribers: list[Callable[[], None]] = []
        if monitor is not None:
            self.store = monitor.store
        else:
            self.store = Store([h.name for h in config.hosts], config.settings.history)
        self.paused = False
        self._jobs_cache: tuple[int, list[JobView]] | None = None
        self._actions = None  # the ActionService, built on first use
        # Alerts: the sinks' callbacks come from the app (`enable_alerts`); the runner starts with
        # the Monitor, when the config has [alerts] rules, and stops before it.
        self._alert_toast: Callable | None = None
        self._alert_write: Callable[[bytes], None] | None = None
        self.alerts = None  # the AlertRunner while it runs
        self.slurm = None  # the SlurmPoller while it runs ([slurm] in the config)
        self.recording_problem: str | None = None  # why the rolling recording stopped; None while it records

    @property
    def config(self):
        """The Config this source watches (its Monitor's, once built)."""
        return self._config if self.monitor is None else self.monitor.config

    def _build_monitor(self):
        if self.monitor is None:
            from ..monitor import Monitor  # built after the first frame: the core loads then

            self.monitor = Monitor(self._config)
            self.store = self.monitor.store
            for callback in self._subscribers:
                self.monitor.subscribe(callback)
            self._jobs_cache = None
        return self.monitor

    def now(self) -> float:
        return time.time()

    # -- alerts: the same rules as `watch --alerts`, plus a toast in this dashboard
    def enable_alerts(self, toast: Callable | None, write: Callable[[bytes], None] | None = None) -> None:
        """Send the config's alerts to `toast(event)` (the app's) and, with `write`, the bell and the
        desktop notification. Call before `run()`; with no [alerts] rules nothing starts."""
        self._alert_toast = toast
        self._alert_write = write

    def watch_recording(self, recorder) -> None:
        """A rolling recording that stops (a full disk) or resumes is an alert: the toast and every
        configured sink (bell, desktop, hook, webhook) hear of it, and the host bar shows it until it resumes."""
        recorder.listeners.append(self._recording_changed)

    def _recording_changed(self, problem: str | None) -> None:
        from ..alerts.events import AlertEvent  # only once a recording stops: not on the first frame's path

        self.recording_problem = problem
        trigger, title = (RECORDING_STOPPED, "recording stopped") if problem else (RECORDING_RESUMED, "recording resumed")
        event = AlertEvent(trigger, "recording", "", title, problem or "the rolling recording writes again")
        if self.alerts is not None:
            self.alerts.dispatcher.dispatch(replace(event, sinks=tuple(self.alerts.dispatcher.sinks)))
        elif self._alert_toast is not None:
            self._alert_toast(event)
        for callback in self._subscribers:
            callback()

    def _start_alerts(self, monitor) -> None:
        alerts = monitor.config.alerts
        if self.alerts is not None or not alerts.enabled:
            return
        if self._alert_toast is None and self._alert_write is None:
            return  # not asked for (e.g. a test of the source alone)
        from ..alerts import AlertRunner, build_sinks  # only with [alerts]

        sinks = build_sinks(alerts, toast=self._alert_toast, write=self._alert_write)
        self.alerts = AlertRunner(monitor, alerts, sinks, tick_s=min(1.0, monitor.config.settings.sample_interval))
        self.alerts.start()

    async def _stop_alerts(self) -> None:
        runner, self.alerts = self.alerts, None
        if runner is not None:
            await runner.stop(drain_s=2.0)  # a hook or webhook in flight gets a moment, not the quit

    # -- actions (kill, restart with -u, py-spy dump): all through the one ActionService
    def action_service(self, readonly: bool = False):
        """The ActionService over this source's Monitor (built on first use; `readonly` fixed then)."""
        if self._actions is None:
            # the action machinery on the first action, not at start-up
            from ..actions.audit import AuditLog, current_user
            from ..actions.service import ActionService

            monitor = self._build_monitor()
            config = monitor.config
            self._actions = ActionService(monitor, config.actions, AuditLog(),
                                          readonly or config.settings.readonly, current_user(),
                                          slurm=self.slurm.watch if self.slurm is not None else None)
        return self._actions

    def plan_action(self, job_id: str, name: str):
        """ActionPlan for the confirm dialog; raises ActionRefused with the reason in words."""
        return self.action_service().plan(job_id, name)

    async def run_action(self, plan):
        """ActionOutcome (or ActionRefused) for a confirmed plan."""
        return await self.action_service().execute(plan)

    def latest_dump(self, job_id: str):
        return self.action_service().latest_dump(job_id)

    async def _rendered_report(self, job_id: str):
        """(now, the job's view, its report text): rendered on this loop (the Monitor's state is only
        consistent here); finding the latest dump runs in a thread. ReportError in words otherwise."""
        from ..incident_report import DEFAULT_LOG_LINES, ReportError, find_job, latest_dump, render_report

        if self.monitor is None:
            raise ReportError("not watching any host yet")
        job = next((j for j in self.jobs() if j.id == job_id), None)
        if job is None:
            raise ReportError(f"no job {job_id!r}: it may have been dismissed")
        now = self.now()
        view = find_job(self.monitor, job.host, job_id, now)
        dump = await asyncio.to_thread(latest_dump, view.host, view.short_id)
        return now, view, render_report(self.monitor, view, now, DEFAULT_LOG_LINES, dump)

    async def write_report(self, job_id: str, directory=None):
        """`e`: the job's incident report; returns its path (the file is written in a thread)."""
        from ..incident_report import save_report

        now, view, text = await self._rendered_report(job_id)
        return await asyncio.to_thread(save_report, text, view, now, directory)

    async def write_bundle(self, job_id: str, directory=None):
        """`E`: the job's incident bundle: the report, the recording's window, every dump (written in a thread)."""
        from pathlib import Path

        from ..incident_bundle import write_bundle
        from ..recording.recorder import FILE_GLOB

        now, view, text = await self._rendered_report(job_id)
        record = self.monitor.config.settings.record
        kept = sorted(Path(record).expanduser().glob(FILE_GLOB)) if record else []
        return await asyncio.to_thread(write_bundle, self.monitor, view.host, view.name, directory,
                                       recordings=kept, now=now, view=view, report=text)

    # -- Slurm: the queue read on the login node, refreshed every poll_interval
    @property
    def has_slurm(self) -> bool:
        config = self.monitor.config if self.monitor is not None else self._config
        return config is not None and config.slurm is not None

    def slurm_jobs(self):
        """Running, pending and recently ended Slurm jobs (SlurmJob records), [] before the first read."""
        return self.slurm.watch.jobs() if self.slurm is not None else []

    def slurm_note(self) -> str | None:
        return self.slurm.note() if self.slurm is not None else None

    async def _start_slurm(self) -> None:
        """Read the queue once before the Monitor is built, so the running jobs' nodes are watched."""
        # the Slurm wing only with [slurm]
        from ..slurm.hosts import with_slurm_jobs
        from ..slurm.poller import SlurmPoller
        from ..slurm.run import make_watch

        watch = make_watch(self._config)
        try:
            await watch.poll()
        except Exception as exc:  # noqa: BLE001 - the hosts of the config are still watched
            watch.problems = [f"queue read failed: {type(exc).__name__}: {exc}"]
        self._config = with_slurm_jobs(self._config, watch.running())
        known_jobs = {j.name for j in self._config.jobs}

        def changed() -> None:
            # Jobs that started since: their nodes and batch scripts are watched from now on.
            if self.monitor is not None:
                from ..slurm.hosts import adopt_new_jobs

                adopt_new_jobs(self.monitor, self._config.slurm, watch.running(), known_jobs)
            for callback in self._subscribers:
                callback()

        self.slurm = SlurmPoller(watch, self._config.slurm.poll_interval, changed)

    def jobs(self) -> list[JobView]:
        # Several widgets ask within one refresh, and with many hosts the store changes many
        # times a second: the views (progress history included) are built at most twice a
        # second. Cells show whole seconds, so nothing visible is lost.
        if self.monitor is None:
            return []  # before run(): no tracker yet
        now = self.now()
        key = int(now * 2)
        if self._jobs_cache is None or self._jobs_cache[0] != key:
            self._jobs_cache = (key, self.monitor.tracker.views(now))
        return self._jobs_cache[1]

    def job_log(self, job_id: str) -> list[str]:
        return self.monitor.tracker.log_lines(job_id) if self.monitor else []

    def job_log_total(self, job_id: str) -> int:
        return self.monitor.tracker.log_total(job_id) if self.monitor else 0

    def job_procs(self, job_id: str) -> list[ProcInfo]:
        return self.monitor.tracker.procs(job_id) if self.monitor else []

    def job_outdir(self, job_id: str) -> DirStat | None:
        return self.monitor.tracker.outdir(job_id) if self.monitor else None

    def dismiss_job(self, job_id: str) -> bool:
        if self.monitor is None:
            return False
        dismissed = self.monitor.tracker.dismiss(job_id)
        self._jobs_cache = None  # the next read must not show it again
        for callback in self._subscribers:
            callback()
        return dismissed

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._subscribers.append(callback)
        if self.monitor is not None:
            self.monitor.subscribe(callback)

    async def run(self) -> None:
        if self.monitor is None and self._config is not None and self._config.slurm is not None:
            await self._start_slurm()
        monitor = self._build_monitor()
        if self.slurm is not None:
            self.slurm.start()
        for callback in self._subscribers:  # the store object changed: redraw from the new one
            callback()
        self._start_alerts(monitor)
        try:
            await monitor.run()
        finally:  # also when the app cancels this worker without a quit
            await self._stop_alerts()

    async def stop(self) -> None:
        await self._stop_alerts()
        if self.slurm is not None:
            await self.slurm.stop()
        if self.monitor is not None:
            await self.monitor.stop()

"""The gpuwatch dashboard app: wires a DashboardSource to the screens."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from ..actions.registry import ACTIONS, ActionSpec, allowed, by_name, running_words
from ..safe_text import safe_text
from .bindings import binding_for
from .commands import GpuwatchCommands
from .levels import FALLBACK_VARIABLES, job_has_ended
from .messages import ActionFinished, ReportWritten, SourceChanged
from .palette import Palette
from .screens.dashboard import DashboardScreen
from .source import DashboardSource
from .terminal_diff import ShadowScreen, diffed
from .theme_files import DEFAULT_THEME, load_themes
from .widgets.action_outcome import outcome_dump

# The rules of the screens opened from the dashboard: parsed when the first of them opens.
SCREENS_CSS = Path(__file__).with_name("screens.tcss")


def few_colours(color_system: str | None) -> bool:
    """True on terminals with 8 or 16 colours (TERM=xterm, Windows console), where theme colours
    are sent as the nearest ANSI colour and tints vanish."""
    return color_system in ("standard", "windows")


class GpuwatchApp(App):
    CSS_PATH = "gpuwatch.tcss"
    TITLE = "gpuwatch"
    COMMANDS = App.COMMANDS | {GpuwatchCommands}
    # From the one action registry; --readonly hides the unsafe ones (check_action) rather than
    # keeping a second list. The jobs table and the job pane show `x` in their own footers.
    BINDINGS = [binding_for(spec) for spec in ACTIONS]
    # ctrl+c leaves, as in htop, k9s and nvitop (Textual's own default is ctrl+q, which stays too).
    BINDINGS.append(Binding("ctrl+c", "quit", "Quit", show=False, priority=True))

    def __init__(
        self,
        source: DashboardSource,
        theme: str = DEFAULT_THEME,
        themes_dir: Path | None = None,
        readonly: bool = False,
        history: int = 60,
        min_refresh_interval: float = 0.25,
    ) -> None:
        loaded = load_themes(themes_dir)
        # Needed by get_theme_variable_defaults(), which App.__init__ already calls.
        self._theme_defaults = dict(FALLBACK_VARIABLES)
        if DEFAULT_THEME in loaded.themes:
            self._theme_defaults.update(loaded.themes[DEFAULT_THEME].variables)
        super().__init__()
        self.source = source
        # Redraws from data happen at most this often (4 Hz): 128 hosts each reporting once a
        # second would otherwise mean 128 redraws a second. Keys are not throttled.
        self.min_refresh_interval = min_refresh_interval
        self._last_refresh = 0.0
        self._refresh_timer = None
        self.readonly = readonly
        # Action state, owned by the handlers: job id -> action name while it runs; the last outcome
        # (with its local time) and the last py-spy dump per job.
        self.running_actions: dict[str, str] = {}
        self.action_outcomes: dict[str, tuple[object, float]] = {}
        self.latest_dumps: dict[str, object] = {}
        self.history = history
        self.theme_problems = list(loaded.problems)
        for t in loaded.themes.values():
            self.register_theme(t)
        self.theme_names = list(loaded.themes)
        if theme not in self.available_themes:
            self.theme_problems.append(f"theme {theme!r} not found; using {DEFAULT_THEME}")
            theme = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self._set_first_theme(theme)
        # What the terminal shows, so a refresh writes only the cells that changed (terminal_diff).
        self._shadow = ShadowScreen()

    def _display(self, screen, renderable) -> None:
        super()._display(screen, diffed(renderable, self._shadow))

    def on_resize(self, event) -> None:
        self._shadow.forget()  # the terminal may have reflowed or cleared what it showed

    def _set_first_theme(self, theme: str) -> None:
        if self.get_theme(theme).dark != self.current_theme.dark:
            self.theme = theme  # the watcher also swaps the dark/light classes and ANSI colour mapping
            return
        # Without the watcher: it would refresh the CSS once running, parsing every stylesheet a
        # second time (~20 ms of start-up). The stylesheet has not been parsed yet, so new
        # variables are all it needs; dark/light classes and ANSI mapping already match.
        self.set_reactive(App.theme, theme)
        self.stylesheet.set_variables(self.get_css_variables())
        self.set_class(True, f"-theme-{theme}", update=False)

    def push_screen(self, screen, *args, **kwargs):
        self._load_screens_css()
        return super().push_screen(screen, *args, **kwargs)

    def _load_screens_css(self) -> None:
        """Add screens.tcss to the stylesheet before the first screen above the dashboard opens.
        Parsing it before the first frame cost ~2% of start-up; now only this file is parsed, once
        (the sheets already parsed come from the stylesheet's cache). Same priority as CSS_PATH."""
        path = str(SCREENS_CSS)
        if self.stylesheet.has_source(path):
            return
        self.stylesheet.add_source(SCREENS_CSS.read_text(encoding="utf-8"), read_from=(path, ""))
        if self.css_monitor is not None:  # `textual run --dev`: reload it on change too
            self.css_monitor.add_paths([SCREENS_CSS])

    def offered_actions(self) -> tuple[ActionSpec, ...]:
        """The registry actions this dashboard offers (read-only mode drops those that change a host)."""
        return allowed(self.readonly)

    def get_system_commands(self, screen):
        """Textual's palette commands less those gpuwatch has its own of: Quit and Theme once each (Textual's
        theme picker also offers themes that lack gpuwatch's colours), Keys (gpuwatch's help is `?`)."""
        ours = {spec.title for spec in self.offered_actions()} | {"Keys"}
        for command in super().get_system_commands(screen):
            if command.title not in ours:
                yield command

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # False hides the binding and refuses the key: in read-only mode kill / restart / dump do not exist.
        if action == "job_action" and parameters:
            return by_name(str(parameters[0])) in self.offered_actions()
        return True

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return self._theme_defaults

    def get_default_screen(self) -> DashboardScreen:
        return DashboardScreen(self.history)

    # -- lifecycle -------------------------------------------------------------------------

    def on_mount(self) -> None:
        # Headless (tests, screenshots) Rich sees no terminal and guesses 16 colours: ignore that.
        if not self.is_headless and few_colours(self.console.color_system):
            self.add_class("-few-colours")  # see gpuwatch.tcss
        for problem in self.theme_problems:  # each reported once, at start
            self.notify(problem, title="theme", severity="error", timeout=10)
        self.source.subscribe(self._source_changed)
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        # Sampling starts once the first frame is on screen (starting it may take a moment).
        self.call_after_refresh(self._start_source)

    def _start_source(self) -> None:
        # What exists now (modules, classes, the first screen: ~100k objects) lives as long as the
        # app: take it out of the collector's full passes, which otherwise rescan all of it and
        # land as 20-60 ms pauses inside key presses. The CLI pauses the collector through
        # start-up; from here on it runs as usual.
        gc.freeze()
        gc.enable()
        self.run_worker(self.source.run(), exclusive=True, group="source", name="source")

    def _source_changed(self) -> None:
        # Called by the core on this loop; the message coalesces if the UI is behind.
        self.post_message(SourceChanged())

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        # Toasts carry host text (job names, refusals, alert text): shown as text, never obeyed or read as markup.
        super().notify(safe_text(str(message), keep="\n"), title=safe_text(str(title)), severity=severity,
                       timeout=timeout, markup=False)

    def show_alert(self, event) -> None:
        """The toast sink (alerts.CallbackSink calls it on the app's loop): words only, no I/O."""
        self.notify(event.one_line(), title="gpuwatch alert", timeout=15,
                    severity="error" if event.severity == "critical" else "warning")

    def on_source_changed(self, message: SourceChanged) -> None:
        if self.source.paused or self._refresh_timer is not None:
            return  # a redraw is already scheduled; it will read the newest data
        wait = self._last_refresh + self.min_refresh_interval - time.monotonic()
        if wait <= 0:
            self._refresh_screen()
        else:
            self._refresh_timer = self.set_timer(wait, self._refresh_screen)

    def _refresh_screen(self) -> None:
        self._refresh_timer = None
        self._last_refresh = time.monotonic()
        # A refresh queued by the source may land after the app has begun to close (no screen left).
        if self.source.paused or not self.screen_stack:
            return
        refresh = getattr(self.screen, "refresh_from_source", None)
        if refresh is not None:
            refresh()

    def _on_theme_changed(self, _theme) -> None:
        palette = Palette(self.theme_variables)
        for screen in self.screen_stack:
            changed = getattr(screen, "theme_changed", None)
            if changed is not None and screen.is_mounted:
                changed(palette)

    async def action_quit(self) -> None:
        await self.source.stop()
        self.exit(0)

    # -- keys ------------------------------------------------------------------------------

    def action_help(self) -> None:
        from .screens.help_screen import HelpScreen  # not needed for the first frame

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_pause(self) -> None:
        self.source.paused = paused = not self.source.paused
        # Show the mark at once and cheaply; on resume the newest data follows a frame later.
        show_paused = getattr(self.screen, "show_paused", None)
        if show_paused is not None:
            show_paused(paused)
        if not paused:
            self.call_after_refresh(self._refresh_screen)

    def action_next_theme(self) -> None:
        names = self.theme_names or [self.theme]
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=1.5)

    # -- actions on a host (k / u / d) -----------------------------------------------------

    def _selected_job(self):
        job_id = getattr(self.screen, "selected_job_id", None)
        return next((j for j in self.source.jobs() if j.id == job_id), None) if job_id else None

    def action_job_action(self, name: str) -> None:
        """k / u / d: plan (no I/O), show the plan, and only once confirmed run it in a worker."""
        spec = by_name(name)
        title = spec.title[:1].lower() + spec.title[1:]
        job = self._selected_job()
        if job is None:
            self.notify(f"{title}: no job selected", severity="warning", timeout=3)
            return
        running = self.running_actions.get(job.id)
        if running is not None:
            self.notify(f"{title}: {job.name or job.id} is busy ({running_words(running)})",
                        severity="warning", timeout=3)
            return
        planner = getattr(self.source, "plan_action", None)
        if planner is None:
            self.notify(f"{title}: this dashboard's source cannot act on hosts", severity="warning", timeout=4)
            return
        from ..actions.service import ActionRefused  # the service is only needed once a key is pressed

        try:
            plan = planner(job.id, name)
        except ActionRefused as refused:
            self.notify(f"{title} refused: {refused.reason}", title=f"{job.name or job.id} on {job.host}",
                        severity="warning", timeout=6)
            return
        if not plan.confirm:
            self._start_action(plan)
            return
        from .screens.confirm_action import ConfirmActionScreen  # not needed for the first frame

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._start_action(plan)

        self.push_screen(ConfirmActionScreen(plan), confirmed)

    def _start_action(self, plan) -> None:
        self.running_actions[plan.job_id] = plan.action
        self.notify(f"{running_words(plan.action)} {plan.label} on {plan.host}",
                    timeout=3)
        self.run_worker(self._run_action(plan), group="actions", name=f"{plan.action} {plan.job_id}",
                        exit_on_error=False)
        self._refresh_screen()

    async def _run_action(self, plan) -> None:
        """The worker: runs the action and posts the outcome; the handler owns every bit of state."""
        from ..actions.service import ActionRefused  # the service is only needed once a key is pressed

        try:
            outcome = await self.source.run_action(plan)
        except ActionRefused as refused:  # e.g. the job changed between the dialog and the confirm
            self.post_message(ActionFinished(plan, error=f"refused: {refused.reason}"))
        except Exception as exc:  # noqa: BLE001 - an action that blew up must be reported, not crash the dashboard
            self.post_message(ActionFinished(plan, error=f"failed: {type(exc).__name__}: {exc}"))
        else:
            self.post_message(ActionFinished(plan, outcome))

    def on_action_finished(self, message: ActionFinished) -> None:
        plan, outcome = message.plan, message.outcome
        self.running_actions.pop(plan.job_id, None)
        title = f"{by_name(plan.action).title} · {plan.label} on {plan.host}"
        if outcome is None:
            self.notify(message.error or "failed", title=title, severity="error", timeout=10)
            self._refresh_screen()
            return
        self.action_outcomes[plan.job_id] = (outcome, time.time())
        # The toast keeps to the first lines; the job pane and the stack view show the rest.
        lines = outcome.summary()
        self.notify("\n".join(lines[:3]) or ("done" if outcome.ok else "failed"), title=title,
                    severity="information" if outcome.ok else "error", timeout=8 if outcome.ok else 15)
        dump = outcome_dump(outcome)
        if dump is not None:
            self.latest_dumps[plan.job_id] = dump
        self._refresh_screen()  # before the stack view covers the screen the person was on
        if dump is not None:
            self.show_stacks(plan.job_id)

    def latest_dump(self, job_id: str):
        """The newest dump of this job: taken here, or one the source already knows of."""
        dump = self.latest_dumps.get(job_id)
        if dump is None:
            known = getattr(self.source, "latest_dump", None)
            dump = known(job_id) if known is not None else None
        return dump

    def show_stacks(self, job_id: str) -> bool:
        """Open the stack view of the job's latest dump; False when none was taken."""
        from .screens.stack_view import StackViewScreen  # not needed for the first frame

        dump = self.latest_dump(job_id)
        if dump is None:
            return False
        if isinstance(self.screen, StackViewScreen):
            self.pop_screen()
        self.push_screen(StackViewScreen(dump))
        return True

    # -- incident report (e) ------------------------------------------------------------------

    def action_write_report(self) -> None:
        """`e`: the selected job's incident report, written by a worker (file I/O off the loop)."""
        job = self._selected_job()
        if job is None:
            self.notify("e: no job selected", severity="warning", timeout=3)
            return
        writer = getattr(self.source, "write_report", None)
        if writer is None:
            self.notify("incident report: this dashboard's source has no hosts to report on",
                        severity="warning", timeout=4)
            return
        self.run_worker(self._write_report(writer, job), group="reports", name=f"report {job.id}",
                        exit_on_error=False)

    def action_write_bundle(self) -> None:
        """`E`: the selected job's incident bundle (the report, the recording window, every dump)."""
        job = self._selected_job()
        writer = getattr(self.source, "write_bundle", None)
        if job is None or writer is None:
            self.notify("E: no job selected" if job is None else "incident bundle: this dashboard's source has "
                        "no hosts to report on", severity="warning", timeout=4)
            return
        self.run_worker(self._write_report(writer, job), group="reports", name=f"bundle {job.id}",
                        exit_on_error=False)

    async def _write_report(self, writer, job) -> None:
        from ..incident_bundle import BundleError  # not needed for the first frame
        from ..incident_report import ReportError

        try:
            path = await writer(job.id)
        except (ReportError, BundleError) as exc:
            self.post_message(ReportWritten(job, error=str(exc)))
        except Exception as exc:  # noqa: BLE001 - reported in a toast, never a crashed dashboard
            self.post_message(ReportWritten(job, error=f"failed: {type(exc).__name__}: {exc}"))
        else:
            self.post_message(ReportWritten(job, path=path))

    def on_report_written(self, message: ReportWritten) -> None:
        title = f"incident report · {message.job.name or message.job.id} on {message.job.host}"
        if message.error is not None:
            self.notify(message.error, title=title, severity="error", timeout=10)
        else:
            self.notify(f"written to {message.path}", title=title, timeout=15)

    def action_dismiss_job(self) -> None:
        """`x`: forget the selected job once it has ended (its final verdict stays until then).
        Local to this dashboard (nothing is done on the host), so read-only mode allows it."""
        job_id = getattr(self.screen, "selected_job_id", None)
        job = next((j for j in self.source.jobs() if j.id == job_id), None) if job_id else None
        if job is None:
            self.notify("x: no job selected", severity="warning", timeout=3)
            return
        if not job_has_ended(job):
            self.notify("x: job is still running; dismiss is for ended jobs", severity="warning", timeout=3)
            return
        self.source.dismiss_job(job_id)
        self.notify(f"dismissed {job.name or job_id} on {job.host}", timeout=2)
        from .screens.job_screen import JobScreen  # not needed for the first frame

        if isinstance(self.screen, JobScreen) and self.screen.job_id == job_id:
            self.pop_screen()
        self.call_after_refresh(self._refresh_screen)

    def open_job(self, job_id: str) -> None:
        from .screens.job_screen import JobScreen, job_pane  # not needed for the first frame

        if isinstance(self.screen, JobScreen) and self.screen.job_id == job_id:
            return
        self.push_screen(job_pane(self, job_id))  # built once, then reused

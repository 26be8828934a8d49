"""The job pane: verdict with evidence and advice, phase history, following log tail, processes,
output directory.

One pane is built on the first open and reused for every job after (`job_pane`): composing its
~50 widgets on each enter, and removing them on each escape, cost 50-250 ms a key press on two
shared cores. Reuse means every bit of per-job state is reset in `show_job`.
"""

from __future__ import annotations

from ..safe_rich import safe_rich

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Input, Static

from ...actions.collective_evidence import ras_report
from ...actions.registry import by_name, running_words
from ...views import JobView
from ..levels import job_has_ended
from ..palette import Palette
from ..widgets.action_outcome import ActionOutcomeTable, outcome_dump
from ..widgets.key_footer import KeyFooter
from ..widgets.leftovers_panel import LeftoversPanel
from ..widgets.log_view import LogView
from ..widgets.outdir_line import OutdirLine
from ..widgets.phase_history import PhaseHistory
from ..widgets.process_table import ProcessTable
from ..widgets.rank_table import RankTable
from ..widgets.verdict_panel import VerdictPanel


class NewLinesMark(Static):
    """"+N new lines": shown while the log is paused; clicking it resumes following."""

    def on_click(self) -> None:
        self.screen.query_one(LogView).action_follow()


class StacksLine(Static):
    """"stacks taken 12:03:04 · s: show": offered once a dump of this job exists; a click opens them."""

    def on_click(self) -> None:
        self.screen.action_show_stacks()


PANE_NAME = "job-pane"  # the reused pane, installed on the app under this name


def job_pane(app, job_id: str) -> "JobScreen":
    """The pane to push for `job_id`: the one built before, pointed at this job; a new one the first
    time, or while the reused one is already on the screen stack (a job opened from a job pane)."""
    if app.is_screen_installed(PANE_NAME):
        pane = app.get_screen(PANE_NAME)
        if pane not in app.screen_stack:
            pane.show_job(job_id)
            return pane
        return JobScreen(job_id)
    pane = JobScreen(job_id)
    app.install_screen(pane, PANE_NAME)
    return pane


class JobScreen(Screen):
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "search", "Search log", key_display="/"),
        # In the footer only once the job has ended; on a live job the key falls through to the
        # app's binding, which says why it cannot be dismissed.
        Binding(by_name("dismiss").key, "dismiss_job", "Dismiss"),
        Binding("s", "show_stacks", "Stacks"),  # in the footer once a dump of this job was taken
        Binding("tab", "app.focus_next", "Next pane", show=False),
    ]

    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id
        self.job: JobView | None = None
        self._title = Text(job_id)
        self._theme: str | None = None  # the theme the widgets' colours were built for

    def compose(self) -> ComposeResult:
        yield Static(id="job-title")
        yield VerdictPanel(id="verdict")
        yield PhaseHistory(id="phase-history")
        yield LeftoversPanel(id="leftovers")
        with Vertical(id="log-box"):
            yield LogView(id="log")
            yield NewLinesMark(id="new-lines")
        yield Input(placeholder="search the log (enter: find, n/N: next/previous, esc: close)", id="log-search")
        yield ActionOutcomeTable(id="action-outcome")
        yield StacksLine(id="stacks-line")
        yield RankTable(id="ranks")
        yield ProcessTable(id="procs")
        yield OutdirLine(id="outdir")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._theme = self.app.theme
        self.query_one("#log-search", Input).display = False
        self.query_one("#new-lines").display = False
        self.query_one(RankTable).display = False
        self.query_one(LeftoversPanel).display = False
        self.query_one(LogView).focus()
        self.refresh_from_source()

    def show_job(self, job_id: str) -> None:
        """Point this pane at `job_id` (before it is pushed again): nothing of the last job stays,
        not its log, search, marks, rows, outcome or focus, then all is read from the source."""
        self.job_id = job_id
        self.job = None
        self._title = Text(job_id)
        if not self.is_mounted:  # opened and left before its first mount ended: on_mount reads this job
            return
        if self.app.theme != self._theme:  # changed while this pane was off the stack
            self.theme_changed(Palette(self.app.theme_variables))
        box = self.query_one("#log-search", Input)
        box.display = False
        box.value = ""
        self.query_one("#new-lines").display = False
        for part in (VerdictPanel, PhaseHistory, OutdirLine, ActionOutcomeTable, LeftoversPanel):
            self.query_one(part).clear()
        self.query_one(LeftoversPanel).display = False
        ranks = self.query_one(RankTable)
        ranks.reset()
        ranks.display = False
        self.query_one(ProcessTable).reset()
        log = self.query_one(LogView)
        log.reset()
        log.focus()
        self.query_one("#job-title", Static).update(safe_rich(self._title))
        self._show_action_state()
        self.refresh_bindings()
        self.refresh_from_source()

    def refresh_from_source(self) -> None:
        if not self.is_mounted:
            return
        source = self.app.source
        now = source.now()
        job = next((j for j in source.jobs() if j.id == self.job_id), None)
        if job is None:
            if self.job is None:
                self.query_one("#job-title", Static).update(f"job {self.job_id} is gone")
            return  # keep showing the last known state of a job that went away
        ended_before = self.job is not None and job_has_ended(self.job)
        self.job = job
        if job_has_ended(job) != ended_before:
            self.refresh_bindings()
        title = Text()
        title.append(job.name or self.job_id, "bold")
        title.append(f" on {', '.join(job.hosts) if job.multi_node else job.host}")
        if job.multi_node:  # GPUs and pids per host: the rank table has them
            title.append(f" · {len(job.ranks)} ranks · {job.run_key}")
        elif job.gpus:
            title.append(f" · GPUs {','.join(str(i) for i in job.gpus)}")
        if job.pids and not job.multi_node:
            title.append(f" · pid {','.join(str(p) for p in job.pids)}")
        if job.log:
            title.append(f" · {job.log}")
        running = self.app.running_actions.get(self.job_id)
        if running is not None:
            title.append(f"  {running_words(running)}", "bold reverse")
        self._title = title
        self.show_paused(source.paused)
        self._show_action_state()
        self.query_one(VerdictPanel).show(job, now)
        self.query_one(PhaseHistory).show(job.history, now)
        leftovers = self.query_one(LeftoversPanel)
        leftovers.display = job.leftovers is not None
        if job.leftovers is not None:
            leftovers.show(job.leftovers, now, self.app.readonly)
        log = self.query_one(LogView)
        total = source.job_log_total(self.job_id)
        if log.wants_lines:
            log.set_lines(source.job_log(self.job_id), total)
        else:
            log.set_total(total)
        host = source.store.hosts.get(job.host)
        sampled_at = host.last_sample_time if host is not None else None
        ranks = self.query_one(RankTable)
        ranks.display = bool(job.ranks)  # a job over several hosts: one row per rank
        if job.ranks:
            ranks.show(job.ranks, now, nccl_verdicts(self.app, self.job_id))
        self.query_one(ProcessTable).show(source.job_procs(self.job_id), now, sampled_at)
        self.query_one(OutdirLine).show(source.job_outdir(self.job_id), now)

    def _show_action_state(self) -> None:
        """The last kill/restart's per-process outcome, and the offer of the latest stacks."""
        table = self.query_one(ActionOutcomeTable)
        last = self.app.action_outcomes.get(self.job_id)
        outcome = last[0] if last else None
        table.display = outcome is not None and outcome_dump(outcome) is None
        if table.display:
            table.show(outcome, time.strftime("%H:%M:%S", time.localtime(last[1])))
        line = self.query_one(StacksLine)
        dump = self.app.latest_dump(self.job_id)
        had = line.display
        line.display = dump is not None
        if dump is not None:
            taken = time.strftime("%H:%M:%S", time.localtime(dump.taken_at))
            line.update(safe_rich(f"py-spy stacks taken {taken}: {dump.analysis.summary}  ·  s: show"))
        if line.display != had:
            self.refresh_bindings()

    def show_paused(self, paused: bool) -> None:
        title = self._title.copy()
        if paused:
            title.append("  PAUSED", "bold reverse")
        self.query_one("#job-title", Static).update(safe_rich(title))

    def theme_changed(self, palette: Palette) -> None:
        self._theme = self.app.theme
        for widget in (self.query_one(VerdictPanel), self.query_one(PhaseHistory), self.query_one(ActionOutcomeTable),
                       self.query_one(OutdirLine), self.query_one(LogView), self.query_one(LeftoversPanel)):
            widget.theme_changed(palette)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "dismiss_job":
            return self.job is not None and job_has_ended(self.job)
        if action == "show_stacks":
            return self.app.latest_dump(self.job_id) is not None
        return True

    def action_show_stacks(self) -> None:
        self.app.show_stacks(self.job_id)

    def action_dismiss_job(self) -> None:
        self.app.action_dismiss_job()

    @property
    def selected_job_id(self) -> str:
        return self.job_id

    # -- follow mark -----------------------------------------------------------------------

    def on_log_view_follow_changed(self, event: LogView.FollowChanged) -> None:
        mark = self.query_one("#new-lines", NewLinesMark)
        if event.follow:
            mark.display = False
            self.refresh_from_source()  # catch up at once
        else:
            mark.display = True
            count = event.new_lines
            mark.update(f"paused · +{count} new line{'s' if count != 1 else ''} · f / end / click: follow")

    # -- search ----------------------------------------------------------------------------

    def action_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "log-search":
            return
        log = self.query_one(LogView)
        term = event.value.strip()
        if not term:
            log.clear_search()
        else:
            count = log.search(term)
            self.notify(f"{count} match{'es' if count != 1 else ''} for {term!r}", timeout=2)
        log.focus()

    def action_back(self) -> None:
        box = self.query_one("#log-search", Input)
        if box.display:
            box.display = False
            box.value = ""
            self.query_one(LogView).focus()
            return
        self.app.pop_screen()


def nccl_verdicts(app, job_id: str) -> dict[int, str]:
    """rank -> NCCL RAS's word on it ("behind: ...") from the job's latest dump; only the ranks it flags."""
    dump = app.latest_dump(job_id)
    report = ras_report(dump.ras) if dump is not None else None
    if report is None:
        return {}
    return {r.rank: f"{r.verdict} ({r.evidence})" for r in report.flagged}

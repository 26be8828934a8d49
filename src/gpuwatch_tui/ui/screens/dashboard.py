"""The main screen: host bar, GPU grid grouped by host, jobs table, filter line."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input

from ...views import JobView
from ..palette import Palette
from ..widgets.gpu_grid import GpuGrid
from ..widgets.host_bar import HostBar
from ..widgets.jobs_table import JobsTable


def job_matches(job: JobView, term: str) -> bool:
    haystack = " ".join(str(value or "") for value in (job.host, job.name, job.phase, job.detail)).lower()
    return term in haystack


class DashboardScreen(Screen):
    BINDINGS = [
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False),
    ]

    def __init__(self, history: int) -> None:
        super().__init__()
        self.history = history
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield HostBar(id="host-bar")
        yield GpuGrid(self.history, id="gpu-grid")
        yield JobsTable(id="jobs")
        yield Input(placeholder="filter hosts and jobs (enter: keep, esc: clear)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one(JobsTable).focus()
        self.refresh_from_source()

    def on_screen_resume(self) -> None:
        self.refresh_from_source()

    # -- data ------------------------------------------------------------------------------

    def refresh_from_source(self) -> None:
        """Re-read the source and redraw; widgets only repaint what changed or is visible."""
        if not self.is_mounted:
            return
        source = self.app.source
        now = source.now()
        jobs = source.jobs()
        term = self.filter_text.lower()
        host_filter = None
        if term:
            jobs = [j for j in jobs if job_matches(j, term)]
            host_filter = {name for name in source.store.hosts if term in name.lower()}
            host_filter |= {j.host for j in jobs}
        self.query_one(HostBar).show(source.store, now, source.paused)
        self.query_one(GpuGrid).show(source.store, jobs, now, host_filter)
        self.query_one(JobsTable).show(jobs, now)

    def show_paused(self, paused: bool) -> None:
        self.query_one(HostBar).set_paused(paused)

    def theme_changed(self, palette: Palette) -> None:
        for widget in (self.query_one(HostBar), self.query_one(GpuGrid), self.query_one(JobsTable)):
            widget.theme_changed(palette)
        self.refresh_from_source()

    @property
    def selected_job_id(self) -> str | None:
        grid = self.query_one(GpuGrid)
        if grid.has_focus:
            return grid.job_at(grid.cursor)
        return self.query_one(JobsTable).selected_job_id

    # -- filter ----------------------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value.strip()
            self.refresh_from_source()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value.strip():
                event.input.display = False
            self.query_one(JobsTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if not box.display and not self.filter_text:
            return
        box.value = ""
        box.display = False
        self.filter_text = ""
        self.query_one(JobsTable).focus()
        self.refresh_from_source()

    # -- open a job ------------------------------------------------------------------------

    def on_jobs_table_open_job(self, event: JobsTable.OpenJob) -> None:
        self.app.open_job(event.job_id)

    def on_gpu_grid_open_job(self, event: GpuGrid.OpenJob) -> None:
        self.app.open_job(event.job_id)

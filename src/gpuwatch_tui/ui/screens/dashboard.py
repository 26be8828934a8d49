"""The main screen: fleet summary bar, GPU grid grouped by host, jobs table (or the GPU process
view), and a history chart of the selected host or GPU in the rows left over.

Pane heights are set here from what each pane has to show, so the screen has no blank stretch:
the grid takes the rows its hosts need (capped so the jobs keep room), the jobs table the rows its
jobs need, and the history view whatever is left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from ...vocab import HOST_OK_STATES
from ..palette import Palette
from ..widgets.gpu_grid import GpuGrid
from ..widgets.gpu_processes import GpuProcessTable
from ..widgets.history_view import HistoryView
from ..widgets.host_bar import HostBar
from ..widgets.jobs_table import JobsTable, distinguishing_parts
from ..widgets.key_footer import KeyFooter

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...views import JobView

# What "problems only" (ctrl+z, as in k9s) keeps: jobs in these phases, hosts not connected, and GPUs held
# by a process no job claims (leftovers).
PROBLEM_PHASES = frozenset({"stalled", "crashed", "silent"})
CHROME_ROWS = 2  # the summary bar and the footer
MIN_HISTORY_ROWS = 5  # fewer spare rows than this go to the table instead
MIN_LOWER_ROWS = 4  # the jobs table always keeps at least this (header + 3 jobs) when it has jobs


def job_matches(job: JobView, term: str, part: str | None = None) -> bool:
    """Whether the filter `term` (lower case) is in what the screen shows of the job: its host(s), short
    id, name and the part that tells it from same-named jobs (a log's folder or file: its path, so
    `/buffered` finds .../buffered/train.log), its phase as shown ("silent (buffered-stdout)")."""
    phase = job.phase + (f" ({job.detail})" if job.detail else "")
    shown = (job.host, *job.hosts, job.short_id, job.id, job.name, part, job.log, phase)
    return any(term in value.lower() for value in shown if value)


def is_problem(job: JobView) -> bool:
    """A job to show under "problems only": a problem phase, or processes it left behind."""
    return job.phase in PROBLEM_PHASES or job.leftovers is not None


def empty_note(every: int, problems_only: bool, term: str, reached: bool = True) -> str:
    """What the jobs table says when it shows no job: why, and the key that shows them. `reached`: whether
    any host is connected (with none, "no job found" would read as "nothing is running")."""
    if not every:
        return "no training job found on the hosts shown" if reached else "no host reached yet: see the host lines"
    hidden = f"{every} job{'s' if every != 1 else ''} hidden"
    if problems_only and term:
        return f"no stalled, crashed or silent job and no leftovers match “{term}” ({hidden}; ctrl+z: all)"
    if problems_only:
        return f"nothing stalled, crashed or silent, no leftovers ({hidden}; ctrl+z: all)"
    return f"no job matches “{term}” ({hidden}; esc: clear the filter)"


def problem_hosts(store, jobs: list[JobView]) -> set[str]:
    """Hosts with something wrong: not connected, a problem job, or a GPU process no job claims."""
    claimed = {slot for job in jobs for slot in job.gpu_slots}
    claimed_pids = {slot for job in jobs for slot in job.pid_slots}
    out = {job.host for job in jobs if is_problem(job)}
    for host in store.hosts.values():
        if host.state not in HOST_OK_STATES:
            out.add(host.name)
            continue
        for index, record in host.gpus.items():
            if any((host.name, proc.pid) not in claimed_pids for proc in record.latest.processes) \
                    and (host.name, index) not in claimed:
                out.add(host.name)
    return out


def pane_heights(available: int, grid_need: int, lower_need: int) -> tuple[int, int, int]:
    """(grid, lower table, history) heights that fill `available` rows."""
    if grid_need + lower_need <= available:
        spare = available - grid_need - lower_need
        if spare >= MIN_HISTORY_ROWS:
            return grid_need, lower_need, spare
        return grid_need, lower_need + spare, 0
    lower = min(lower_need, max(MIN_LOWER_ROWS, available * 2 // 5))
    grid = max(2, min(grid_need, available - lower))
    return grid, max(0, available - grid), 0


class DashboardScreen(Screen):
    BINDINGS = [
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("g", "toggle_processes", "GPU processes"),
        Binding("ctrl+z", "toggle_problems", "Problems only", show=False),
        Binding("w", "users", "Who uses what", show=False),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False),
    ]

    def __init__(self, history: int) -> None:
        super().__init__()
        self.history = history
        self.filter_text = ""
        # Typing a filter keeps focus where it is: moving focus to an Input made Textual rebuild
        # the footer and relayout the screen on every `/` (120-270 ms at 128 hosts).
        self.filtering = False
        self.problems_only = False

    def compose(self) -> ComposeResult:
        # Kept, not looked up: a DOM query each frame for each of them was a sixth of a frame's work.
        self._bar = HostBar(id="host-bar")
        self._grid = GpuGrid(self.history, id="gpu-grid")
        self._jobs_table = JobsTable(id="jobs")
        self._processes = GpuProcessTable(id="gpu-processes")
        self._history_view = HistoryView(id="history")
        yield self._bar
        yield self._grid
        yield self._jobs_table
        yield self._processes
        # The Slurm queue exists only where the source reads one ([slurm] in the config): without
        # it the first frame skips the queue's import, DataTable's and its CSS (~20 ms of start-up).
        self._slurm = None
        if getattr(self.app.source, "has_slurm", False):
            from ..widgets.slurm_queue import SlurmQueueTable

            self._slurm = SlurmQueueTable(id="slurm-queue")
            yield self._slurm
        yield self._history_view
        yield KeyFooter()

    def on_mount(self) -> None:
        self._processes.display = False
        self._jobs_table.focus()
        self.refresh_from_source()

    def on_screen_resume(self) -> None:
        self.refresh_from_source()

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._size_panes)

    # -- data ------------------------------------------------------------------------------

    @property
    def lower_table(self) -> JobsTable | GpuProcessTable:
        processes = self._processes
        return processes if processes.display else self._jobs_table

    def refresh_from_source(self) -> None:
        """Re-read the source and redraw; widgets only repaint what changed or is visible."""
        if not self.is_mounted:
            return
        source = self.app.source
        now = source.now()
        jobs = source.jobs()
        every = len(jobs)
        term = self.filter_text.lower()
        host_filter = None
        if self.problems_only:
            host_filter = problem_hosts(source.store, jobs)
            jobs = [j for j in jobs if is_problem(j)]
        if term:
            parts = distinguishing_parts(jobs)  # as the jobs table shows them (before any is filtered out)
            jobs = [j for j in jobs if job_matches(j, term, parts.get(j.id))]
            matching = {name for name in source.store.hosts if term in name.lower()} | {j.host for j in jobs}
            host_filter = matching if host_filter is None else host_filter & matching
        bar = self._bar
        bar.set_filter(self.filter_text, self.filtering)
        bar.set_problems_only(self.problems_only)
        bar.show(source.store, now, source.paused)
        grid = self._grid
        grid.show(source.store, jobs, now, host_filter)
        if jobs:
            self._jobs_table.set_empty_note("")
        else:
            reached = any(h.state in HOST_OK_STATES for h in source.store.hosts.values())
            self._jobs_table.set_empty_note(empty_note(every, self.problems_only, self.filter_text, reached))
        self._jobs_table.show(jobs, now, running=self.app.running_actions)
        processes = self._processes
        if processes.display:
            processes.show(source.store, jobs, host_filter, now)
        slurm = self._slurm
        if slurm is not None:
            from ...slurm.display import queue_rows  # only with [slurm], as the table above

            slurm.show(queue_rows(source.slurm_jobs()), source.slurm_note())
        history = self._history_view
        if history.host is None:
            history.select(*grid.selection)
        history.show(source.store)
        self._size_panes()

    def _size_panes(self) -> None:
        grid = self._grid
        lower = self.lower_table
        history = self._history_view
        available = self.size.height - CHROME_ROWS
        slurm = self._slurm
        if slurm is not None:  # the queue keeps its rows (a quarter of the screen at most) above the history
            slurm_h = min(slurm.row_count + 1, max(3, available // 4))
            if slurm.styles.height is None or slurm.styles.height.value != slurm_h:
                slurm.styles.height = slurm_h
            available -= slurm_h
        if available <= 0:
            return
        grid_h, lower_h, history_h = pane_heights(available, grid.rows_needed, max(1, lower.row_count) + 1)
        for widget, height in ((grid, grid_h), (lower, lower_h), (history, history_h)):
            if widget.styles.height is None or widget.styles.height.value != height:
                widget.styles.height = height  # only a real change costs a relayout

    def on_gpu_grid_selected(self, event: GpuGrid.Selected) -> None:
        history = self._history_view
        history.select(event.host, event.gpu)
        history.show(self.app.source.store)

    def show_paused(self, paused: bool) -> None:
        self._bar.set_paused(paused)

    def theme_changed(self, palette: Palette) -> None:
        for widget in (self._bar, self._grid, self._jobs_table,
                       self._processes, self._slurm, self._history_view):
            if widget is not None:
                widget.theme_changed(palette)
        self.refresh_from_source()

    @property
    def selected_job_id(self) -> str | None:
        grid = self._grid
        if grid.has_focus:
            return grid.job_at(grid.cursor)
        return self._jobs_table.selected_job_id

    # -- GPU process view ------------------------------------------------------------------

    def action_toggle_processes(self) -> None:
        processes = self._processes
        jobs = self._jobs_table
        showing = not processes.display
        processes.display = showing
        jobs.display = not showing
        (processes if showing else jobs).focus()
        self.refresh_from_source()

    # -- filter ----------------------------------------------------------------------------

    def action_users(self) -> None:
        from .users_screen import UsersScreen  # not needed for the first frame

        self.app.push_screen(UsersScreen())

    def action_toggle_problems(self) -> None:
        self.problems_only = not self.problems_only
        self.refresh_from_source()

    def action_filter(self) -> None:
        self.filtering = True
        self.refresh_from_source()

    def on_key(self, event: events.Key) -> None:
        """While filtering, printable keys edit the filter (focus stays on the pane)."""
        if not self.filtering:
            return
        if event.key == "enter":
            self.filtering = False
        elif event.key == "backspace":
            self.filter_text = self.filter_text[:-1]
        elif event.key == "escape":
            return  # the binding clears it
        elif event.is_printable and event.character:
            self.filter_text += event.character
        else:
            return
        event.stop()
        event.prevent_default()
        self.refresh_from_source()

    def action_clear_filter(self) -> None:
        if not self.filtering and not self.filter_text:
            return
        self.filtering = False
        self.filter_text = ""
        self.refresh_from_source()

    # -- open a job ------------------------------------------------------------------------

    def on_jobs_table_open_job(self, event: JobsTable.OpenJob) -> None:
        self.app.open_job(event.job_id)

    def on_gpu_grid_open_job(self, event: GpuGrid.OpenJob) -> None:
        self.app.open_job(event.job_id)

    def on_gpu_process_table_open_job(self, event: GpuProcessTable.OpenJob) -> None:
        self.app.open_job(event.job_id)

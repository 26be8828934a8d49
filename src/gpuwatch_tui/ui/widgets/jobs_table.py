"""The jobs table: one line per job, drawn with the Line API, sortable, fitted to the width.

Only the rows on screen are rendered, and a row whose cells did not change is served from a
cache, so 128 jobs updating once a second cost what the visible ones cost. Columns are laid out
for the terminal's width: at narrow widths progress is shortened and Rate, Loss and GPUs are
dropped (in that order) rather than scrolling sideways; the job pane has every detail.

`x` dismisses an ended job, `s` cycles the sort column, clicking a header sorts by it (again: reverse), enter or a
double click opens the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, TYPE_CHECKING

from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from ...actions.registry import by_name, running_words
from ...safe_text import safe_text
from .. import formatting, levels
from ..palette import Palette
from .line_list import CURSOR_BINDINGS, LineList

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...views import JobView, ProgressView

# key -> header label. Order is the order on screen.
COLUMNS = (
    ("host", "Host"),
    ("id", "ID"),  # the short id: what a verb takes when every job is `train.py`
    ("job", "Job"),
    ("gpus", "GPUs"),
    ("phase", "Phase"),
    ("since", "Since"),
    ("progress", "Progress"),
    ("rate", "Rate"),
    ("loss", "Loss"),
    ("eta", "ETA"),
)
LABELS = dict(COLUMNS)
GAP = 2  # spaces between columns
# Widest a column may get (its header or content decides below that); None: takes what is left.
MAX_WIDTH = {"host": 16, "id": 12, "job": None, "gpus": 7, "phase": 40, "since": 6, "progress": 16, "rate": 14,
             "loss": 7, "eta": 7}
CELL_CACHE_LIMIT = 4096  # drawn cells kept (a few per job and width); emptied when it is exceeded
MIN_JOB = 14  # below this a job name is cut; drop a less useful column first
MIN_PHASE = 20  # "stalled (nccl-spin)", "silent (buffered-st…": the detail is what matters
# Tried in order until the row fits: (columns dropped, progress shortened to a percentage).
LAYOUTS = (
    ((), False),
    ((), True),
    (("rate",), True),
    (("rate", "loss"), True),
    (("rate", "loss", "gpus"), True),
    (("rate", "loss", "gpus", "since"), True),
)


def _progress_fraction(job: JobView) -> float:
    p = job.progress
    if p.step is not None and p.total:
        return p.step / p.total
    return -1.0


SORT_KEYS: dict[str, Callable[[JobView], Any]] = {
    "host": lambda j: (j.host, j.name),
    "id": lambda j: (j.short_id, j.host),
    "job": lambda j: (j.name, j.host),
    "gpus": lambda j: (len(j.gpus), j.host),
    "phase": lambda j: (levels.PHASE_URGENCY.get(j.phase, 99), j.host),
    "since": lambda j: -(j.since or 0.0),  # longest in its phase first
    "progress": lambda j: -_progress_fraction(j),
    "rate": lambda j: 0.0 if j.phase == "stalled" else -(j.progress.rate or 0.0),
    "loss": lambda j: j.progress.loss or float("inf"),
    "eta": lambda j: float("inf") if levels.job_has_ended(j) or j.phase == "stalled" else j.progress.eta_s or float("inf"),
}


def distinguishing_parts(jobs: list[JobView]) -> dict[str, str]:
    """job id -> what tells it apart from jobs of the same name on the same host (three
    `train.py` runs): its log file's name, else the log's folder, else its main pid. Jobs with a
    unique name get nothing, so the name itself never changes."""
    groups: dict[tuple[str, str], list[JobView]] = {}
    for job in jobs:
        groups.setdefault((job.host, job.name), []).append(job)
    parts: dict[str, str] = {}
    for same in groups.values():
        if len(same) < 2:
            continue
        for pick in (lambda j: j.log.rsplit("/", 1)[-1] if j.log else None,
                     lambda j: j.log.rsplit("/", 2)[-2] if j.log and j.log.count("/") >= 2 else None,
                     lambda j: f"pid {j.pids[0]}" if j.pids else None):
            labels = [pick(j) for j in same]
            if None not in labels and len(set(labels)) == len(labels):
                break
        else:
            labels = [j.id for j in same]
        for job, label in zip(same, labels):
            parts[job.id] = label
    return parts


def short_progress(p: ProgressView | None) -> str:
    if p is None or p.step is None:
        return "-"
    if p.total:
        return f"{100 * p.step / p.total:.0f}%"
    return str(p.step)


@dataclass(frozen=True)
class Layout:
    columns: tuple[tuple[str, int], ...]  # (key, width) on screen, left to right
    short_progress: bool

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.columns)


def fit_columns(width: int, natural: dict[str, int]) -> Layout:
    """The richest layout whose columns fit in `width` cells. Job and phase share what the
    other columns leave: the phase text whole if possible, then the job name as long as it fits."""
    for dropped, short in LAYOUTS:
        keys = [k for k, _ in COLUMNS if k not in dropped]
        widths = {}
        for key in keys:
            want = natural.get(f"{key}:short" if short and key == "progress" else key, len(LABELS[key]))
            cap = MAX_WIDTH[key]
            widths[key] = max(len(LABELS[key]), want if cap is None else min(cap, want))
        others = sum(w for k, w in widths.items() if k not in ("job", "phase")) + GAP * (len(keys) - 1)
        room = width - others
        job_want, phase_want = widths["job"], widths["phase"]
        # The phase whole before the job name whole (the name is cut no shorter than MIN_JOB): at 80
        # columns "silent (buffered-stdout)" is the answer, and a name is known by its first letters.
        phase = max(min(phase_want, MIN_PHASE), min(phase_want, room - min(MIN_JOB, job_want)))
        job = room - phase
        if job >= min(MIN_JOB, job_want) or dropped == LAYOUTS[-1][0]:
            widths["phase"] = phase
            widths["job"] = max(len(LABELS["job"]), min(job, job_want))
            return Layout(tuple((k, widths[k]) for k in keys), short)
    raise AssertionError("unreachable")


class JobsTable(LineList, can_focus=True):
    """Line 0 is the header (it stays while the rows scroll under it)."""

    HEADER_LINES = 1
    empty_note = ""  # what the first row says when no job is shown (the screen says why)

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding(by_name("dismiss").key, "app.dismiss_job", "Dismiss"),
        Binding("s", "cycle_sort", "Sort", show=False),
        *CURSOR_BINDINGS,
    ]
    COMPONENT_CLASSES = {"jobs-table--header", "jobs-table--cursor", "jobs-table--cursor-blurred"}

    class OpenJob(Message):
        def __init__(self, job_id: str) -> None:
            super().__init__()
            self.job_id = job_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._jobs: dict[str, JobView] = {}
        self._cells: dict[str, dict[str, Text | str]] = {}  # job id -> column -> cell
        self._order: list[str] = []  # job ids, top to bottom
        self._shown_at = float("-inf")
        self._layout: Layout | None = None
        self._layout_key: tuple = ()
        self._strips: dict[str, tuple[tuple, Strip]] = {}  # job id -> (signature, strip)
        self._drawn_cells: dict[tuple, list[Segment]] = {}  # (cell, width, padded, row style) -> segments
        self.cursor = 0
        self.sort_column: str | None = None
        self.sort_reverse = False
        self._running_actions: dict[str, str] = {}  # job id -> action name running on it (the app's state)
        # (Not `_running`: that is Textual's own flag, and an empty dict there stopped every repaint.)

    # -- reading it (tests, the screen) ---------------------------------------------------

    @property
    def job_ids(self) -> list[str]:
        return list(self._order)

    @property
    def row_count(self) -> int:
        return len(self._order)

    def get_cell(self, job_id: str, column: str) -> Text | str:
        return self._cells[job_id][column]

    @property
    def selected_job_id(self) -> str | None:
        if not self._order:
            return None
        return self._order[min(self.cursor, len(self._order) - 1)]

    @property
    def layout_keys(self) -> tuple[str, ...]:
        return () if self._layout is None else self._layout.keys

    # -- theme -----------------------------------------------------------------------------

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self._strips.clear()
        self._shown_at = float("-inf")  # recolour every cell on the next show
        self._cells = {}
        self.refresh()

    # -- data in ---------------------------------------------------------------------------

    def _cells_for(self, job: JobView, now: float, part: str | None = None,
                   running: str | None = None) -> dict[str, Text | str]:
        p = self.palette
        progress = job.progress
        phase = job.phase or "unknown"
        phase_text = phase + (f" ({job.detail})" if job.detail else "")
        phase_cell = Text(phase_text, p.style(levels.phase_variable(phase), bold=True))
        if job.leftovers is not None:  # processes it left running after its main process went
            phase_cell.append(f" · {job.leftovers.count} left", p.style("leftover", bold=True))
        if running is not None:
            # First, so a narrow Phase column cuts the phase, not what gpuwatch is doing to the job.
            phase_cell = Text.assemble((running_words(running), "bold reverse"), " ", phase_cell)
        since = job.since
        # A job never seen running has no meaningful "since" (0 or None): show "-".
        since_text = formatting.age(now - since) if since else "-"
        return {
            "host": f"{job.host} +{len(job.hosts) - 1}" if job.multi_node else job.host,
            "id": job.short_id or "-",
            "job": Text.assemble(job.name or job.id, (f" ({part})", p.style("muted"))) if part
            else job.name or job.id,
            "gpus": formatting.hosts_by_gpus(job) if job.multi_node else formatting.gpus(job.gpus),
            "phase": phase_cell,
            "since": since_text,
            "progress": formatting.progress(progress),
            "progress:short": short_progress(progress),
            # A stalled job makes no progress: its last rate and ETA would read as a promise.
            "rate": "-" if job.phase == "stalled" else formatting.rate(progress),
            "loss": formatting.loss(progress),
            # An ended job has no time left: its last ETA would read as a promise.
            "eta": "-" if levels.job_has_ended(job) or job.phase == "stalled" else formatting.eta(progress.eta_s),
        }

    def set_empty_note(self, text: str) -> None:
        if text != self.empty_note:
            self.empty_note = text
            self.refresh()

    def show(self, jobs: list[JobView], now: float, force: bool = False,
             running: Mapping[str, str] | None = None) -> None:
        """Bring the table to `jobs`. Cells have one-second resolution, so with the same set of
        jobs this runs at most once a second of the source's clock; only rows on screen whose
        cells changed are redrawn. `running` (job id -> action name: the app's running actions)
        marks those rows "killing…", "restarting…", "dumping…" at once."""
        wanted = {job.id: job for job in jobs}
        same_set = wanted.keys() == self._jobs.keys()
        running = dict(running or {})
        if not force and same_set and running == self._running_actions and 0 <= now - self._shown_at < 1.0:
            return
        self._running_actions = running
        self._shown_at = now
        selected = self.selected_job_id
        old_cells = self._cells
        cells = {}
        parts = distinguishing_parts(jobs)
        for job_id, job in wanted.items():
            new = self._cells_for(job, now, parts.get(job_id), running.get(job_id))
            old = old_cells.get(job_id)
            cells[job_id] = old if old == new else new  # an unchanged row keeps its cached strip
        self._jobs = wanted
        self._cells = cells
        order = list(wanted)
        if self.sort_column:
            key = SORT_KEYS[self.sort_column]
            order.sort(key=lambda job_id: key(wanted[job_id]), reverse=self.sort_reverse)
        order_changed = order != self._order
        self._order = order
        for job_id in [k for k in self._strips if k not in wanted]:
            del self._strips[job_id]
        self._place_cursor(selected)
        if self._update_layout() or order_changed or not same_set:
            self.refresh()
            return
        # Same rows in the same places: repaint only the visible rows whose cells changed.
        top = int(self.scroll_offset.y)
        width = self.size.width
        for y in range(max(0, self.size.height - 1)):
            index = top + y
            if index >= len(order):
                break
            job_id = order[index]
            if old_cells.get(job_id) is not cells[job_id]:
                self.refresh(Region(0, y + 1, width, 1))

    def _place_cursor(self, selected: str | None) -> None:
        if selected is not None and selected in self._jobs:
            self.cursor = self._order.index(selected)
        self.cursor = max(0, min(self.cursor, len(self._order) - 1))

    def _natural_widths(self) -> dict[str, int]:
        natural: dict[str, int] = {}
        for cells in self._cells.values():
            for key, value in cells.items():
                length = value.cell_len if isinstance(value, Text) else len(value)
                if length > natural.get(key, 0):
                    natural[key] = length
        return natural

    def _update_layout(self) -> bool:
        """Re-fit the columns when the width or the widest content changed; True if it did."""
        natural = self._natural_widths()
        width = self.scrollable_content_region.width or self.size.width
        key = (width, tuple(sorted(natural.items())))
        if key == self._layout_key and self._layout is not None:
            self._sync_virtual_size()
            return False
        self._layout_key = key
        layout = fit_columns(width, natural)
        changed = layout != self._layout
        self._layout = layout
        if changed:
            self._strips.clear()
        self._sync_virtual_size()
        return changed

    def _sync_virtual_size(self) -> None:
        size = Size(self.scrollable_content_region.width or self.size.width, len(self._order) + 1)
        if size != self.virtual_size:
            self.virtual_size = size

    def on_resize(self) -> None:
        self._update_layout()
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------

    def _line(self, values: list[tuple[str, Text | str]], width: int) -> Text:
        layout = self._layout
        text = Text(no_wrap=True, overflow="ellipsis")
        last = len(layout.columns) - 1
        for n, ((key, column_width), (_, value)) in enumerate(zip(layout.columns, values)):
            cell = value.copy() if isinstance(value, Text) else Text(value)
            if cell.cell_len > column_width:
                cell.truncate(column_width, overflow="ellipsis")
            if n < last:
                cell.pad_right(column_width - cell.cell_len + GAP)
            text.append_text(cell)
        return text

    def _row_strip(self, values: list[tuple[str, Text | str]], width: int, style) -> Strip:
        """What `_render_text(_line(values))` draws, built a cell at a time from drawn cells: when a row
        changes it is mostly one cell (its "since" ticks every second), and only that one is drawn again."""
        layout = self._layout
        last = len(layout.columns) - 1
        drawn = self._drawn_cells
        if len(drawn) > CELL_CACHE_LIMIT:
            drawn.clear()
        console = self.app.console
        segments: list[Segment] = []
        for n, ((key, column_width), (_, value)) in enumerate(zip(layout.columns, values)):
            ident = (value if isinstance(value, str) else (value.plain, tuple(value.spans), value.style),
                     column_width, n < last, style)
            cell_segments = drawn.get(ident)
            if cell_segments is None:
                cell = value.copy() if isinstance(value, Text) else Text(value)
                if cell.cell_len > column_width:
                    cell.truncate(column_width, overflow="ellipsis")
                if n < last:
                    cell.pad_right(column_width - cell.cell_len + GAP)
                text = Text(no_wrap=True, overflow="ellipsis")
                text.append_text(cell)
                # As _render_text: every cell passes the sanitiser, on the row's style.
                cell_segments = drawn[ident] = [
                    Segment(safe_text(seg.text), style + seg.style if seg.style else style)
                    for seg in text.render(console)]
            segments.extend(cell_segments)
        return Strip(segments).extend_cell_length(width, style).crop(0, width)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.base_style
        if self._layout is None:
            self._update_layout()
        layout = self._layout
        if y == 0:
            style = base + self.get_component_rich_style("jobs-table--header")
            labels = []
            for key, _ in layout.columns:
                label = LABELS[key]
                if key == self.sort_column:
                    label += " ▼" if not self.sort_reverse else " ▲"
                labels.append((key, label))
            return self._render_text(self._line(labels, width), width, style)
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self._order):
            if index == 0 and self.empty_note:
                return self._render_text(Text(" " + self.empty_note, self.palette.style("muted")), width, base)
            return Strip.blank(width, base)
        job_id = self._order[index]
        cells = self._cells[job_id]
        cursor = index == self.cursor
        focused = self.has_focus
        signature = (id(cells), layout, cursor, cursor and focused, width, id(self._palette), base)
        cached = self._strips.get(job_id)
        if cached is not None and cached[0] == signature:
            return cached[1]
        style = base
        if cursor:
            style = base + self.get_component_rich_style(
                "jobs-table--cursor" if focused else "jobs-table--cursor-blurred")
        values = [(key, cells["progress:short" if key == "progress" and layout.short_progress else key])
                  for key in layout.keys]
        strip = self._row_strip(values, width, style)
        self._strips[job_id] = (signature, strip)
        return strip

    # -- cursor, keys and mouse -----------------------------------------------------------

    def _move_cursor(self, row: int) -> None:
        if not self._order:
            return
        old = self.cursor
        self.cursor = max(0, min(len(self._order) - 1, row))
        # Row n is line n + 1 (under the header); keep the header's line out of the way.
        self.scroll_to_region(Region(0, self.cursor, 1, 2), animate=False, immediate=True)
        if old != self.cursor:
            self.refresh()

    def action_open(self) -> None:
        job_id = self.selected_job_id
        if job_id is not None:
            self.post_message(self.OpenJob(job_id))

    def sort_by(self, column: str, reverse: bool = False) -> None:
        self.sort_column = column
        self.sort_reverse = reverse
        self.show(list(self._jobs.values()), self._shown_at, force=True, running=self._running_actions)
        self.refresh()
        self.notify(f"Sorted by {column}{' (reversed)' if reverse else ''}", timeout=1.5)

    def action_cycle_sort(self) -> None:
        names = [key for key, _ in COLUMNS]
        current = names.index(self.sort_column) if self.sort_column in names else -1
        self.sort_by(names[(current + 1) % len(names)])

    def column_at(self, x: int) -> str | None:
        if self._layout is None:
            return None
        left = 0
        for key, width in self._layout.columns:
            if x < left + width + GAP:
                return key
            left += width + GAP
        return None

    def on_click(self, event: Click) -> None:
        if event.y == 0:
            column = self.column_at(event.x + int(self.scroll_offset.x))
            if column is not None:
                reverse = not self.sort_reverse if column == self.sort_column else False
                self.sort_by(column, reverse)
            return
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self._order):
            self._move_cursor(row)
            if event.chain >= 2:
                self.post_message(self.OpenJob(self._order[row]))


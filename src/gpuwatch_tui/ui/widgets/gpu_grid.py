"""The GPU grid: one block per host, one line per GPU (two GPUs per line on wide terminals).

Drawn with the Line API: only the lines on screen are rendered, so the cost follows the
terminal's height, not the fleet's size (128 hosts x 8 GPUs is 1,000+ lines, no widgets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from ...probe import gpu_metrics
from ...vocab import KIB_PER_GIB, MIB_PER_GIB
from .. import formatting, levels
from ..palette import Palette
from ..sparkline import sparkline
from .host_notes import NOTE_INDENT, error_parts, errors_stay_below, host_notes
from .line_list import CURSOR_BINDINGS, LineList

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...store import GpuRecord, HostRecord, Store
    from ...views import JobView

# The metric table's columns of the grid (gpu_metrics: `grid`), after utilisation and memory.
GRID_METRICS = tuple(m for m in gpu_metrics.METRICS if m.grid)
# Fixed columns of one GPU cell: index, util %, memory used/total, the table's columns, job gap.
CELL_FIXED = 3 + 6 + 9 + sum(1 + len(m.grid[2]) for m in GRID_METRICS) + 1
JOB_MIN = 24  # the short id and the name ("ab3cd llama-8b-pretrain")
TWO_COLUMNS_FROM = 160  # terminal width at which two GPUs share a line
COLUMN_GAP = 3

STATE_LABELS = {
    "connected": "connected",
    "connecting": "connecting",
    "stale": "stale",
    "reconnecting": "reconnecting",
    "unreachable": "unreachable",
    "auth-failed": "auth failed",
    "host-key-unknown": "host key unknown",
    "host-key-changed": "HOST KEY CHANGED",
    "probe-failed": "probe failed",
}


def state_label(host: HostRecord) -> str:
    label = STATE_LABELS.get(host.state, host.state)
    if host.state == "reconnecting" and host.reconnects:
        label = f"{label} {host.reconnects}"
    return label


@dataclass(frozen=True)
class Row:
    kind: str  # "host", "gpus", "note"
    host: str
    gpus: tuple[int, ...] = ()
    text: str = ""
    level: str = "muted"  # a note's theme variable
    errors_below: bool = False  # a host's errors are on the note lines under its header


@dataclass(frozen=True)
class JobRef:
    id: str
    name: str  # as the GPU is labelled: the job's short id and name
    phase: str


class GpuGrid(LineList, can_focus=True):
    """GPU grid grouped by host, with a row cursor (enter opens the job that owns the GPU).
    Line 0 names the columns and stays while the rows scroll under it."""

    HEADER_LINES = 1

    BINDINGS = [
        *CURSOR_BINDINGS,
        Binding("enter", "open", "Open job", show=False),
    ]

    class OpenJob(Message):
        def __init__(self, job_id: str) -> None:
            super().__init__()
            self.job_id = job_id

    class Selected(Message):
        """The cursor moved to another host or GPU (the history view follows it)."""

        def __init__(self, host: str | None, gpu: int | None) -> None:
            super().__init__()
            self.host = host
            self.gpu = gpu

    def __init__(self, history: int = 60, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.history = history
        self._store: Store | None = None
        self._jobs: dict[tuple[str, int], JobRef] = {}
        self._shared: dict[tuple[str, int], int] = {}  # a GPU two or more jobs hold: how many
        self._now = 0.0
        self._host_filter: set[str] | None = None
        self._rows: list[Row] = []
        self._layout_key: tuple = ()
        self.cursor = 0
        self._strips: dict[int, tuple[tuple, Strip]] = {}  # row index -> (signature, strip)
        self._jobs_key: tuple = ()
        # Processes jobs left running after their main process went: a GPU held only by them is marked.
        self._leftover_pids: set[tuple[str, int]] = set()
        self._leftover_jobs: dict[tuple[str, int], JobRef] = {}
        self._errors_below: set[str] = set()  # hosts whose errors do not fit on their header

    # -- data in ---------------------------------------------------------------------------

    def show(self, store: Store, jobs: list[JobView], now: float, host_filter: set[str] | None) -> None:
        """Take new data; rebuild the row index only if hosts or GPU counts changed, and repaint
        only the rows on screen whose content changed."""
        self._store = store
        self._now = now
        self._host_filter = host_filter
        jobs_key = tuple((j.id, j.label, j.phase, j.host, j.gpu_slots,
                          (j.leftovers.pids, j.leftovers.gpus) if j.leftovers else None) for j in jobs)
        if jobs_key != self._jobs_key:
            self._jobs_key = jobs_key
            self._jobs = {}
            self._leftover_pids = set()
            self._leftover_jobs = {}
            counts: dict[tuple[str, int], int] = {}
            for job in jobs:
                for slot in job.gpu_slots:  # a job over several hosts: its GPUs on each
                    self._jobs[slot] = JobRef(job.id, job.label, job.phase or "unknown")
                    counts[slot] = counts.get(slot, 0) + 1
                if job.leftovers is not None:
                    self._leftover_pids.update((job.host, pid) for pid in job.leftovers.pids)
                    for index in job.leftovers.gpus:
                        self._leftover_jobs[(job.host, index)] = JobRef(job.id, job.label, job.phase or "unknown")
            self._shared = {slot: n for slot, n in counts.items() if n > 1}
        if self._relayout():
            self.refresh()
            return
        top = int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        for y in range(self.scrollable_content_region.height - self.HEADER_LINES):
            index = top + y
            if index >= len(self._rows):
                break
            cached = self._strips.get(index)
            row = self._rows[index]
            host = store.hosts.get(row.host)
            if cached is None or host is None or cached[0][0] != self._signature(row, host):
                self.refresh(Region(0, y + self.HEADER_LINES, width, 1))

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self._strips.clear()
        self.refresh()

    def on_resize(self) -> None:
        self._relayout(force=True)

    @property
    def columns(self) -> int:
        return 2 if self.size.width >= TWO_COLUMNS_FROM else 1

    def _relayout(self, force: bool = False) -> bool:
        """Rebuild the row index if the hosts shown or their GPU counts changed; True if it did."""
        store = self._store
        if store is None:
            return False
        hosts = [h for h in store.hosts.values() if self._host_filter is None or h.name in self._host_filter]
        # As if the scrollbar were shown: it comes and goes without a resize, and a note wrapped for the
        # wider width would be cut when it appears.
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        notes = {h.name: self._notes(h, width) for h in hosts if h.hint or h.error or h.gpu_error}
        key = (self.columns, tuple((h.name, len(h.gpus), notes.get(h.name)) for h in hosts))
        if key == self._layout_key and not force:
            return False
        self._layout_key = key
        columns = self.columns
        rows: list[Row] = []
        for host in hosts:
            rows.append(Row("host", host.name, errors_below=host.name in self._errors_below))
            for note in notes.get(host.name, ()):
                rows.append(Row("note", host.name, text=note.text, level=note.level))
            indices = sorted(host.gpus)
            for start in range(0, len(indices), columns):
                rows.append(Row("gpus", host.name, tuple(indices[start : start + columns])))
        self._rows = rows
        self._strips.clear()
        self.cursor = min(self.cursor, max(0, len(rows) - 1))
        self.virtual_size = Size(self.size.width, len(rows) + self.HEADER_LINES)
        return True

    def _notes(self, host: HostRecord, width: int) -> tuple:
        """The host's note lines at this width; decides whether its errors fit on its header."""
        below = False
        if error_parts(host) and width > 0:
            below = errors_stay_below(self._host_line(host).cell_len, width, host.name in self._errors_below)
        (self._errors_below.add if below else self._errors_below.discard)(host.name)
        return host_notes(host, width, below)

    @property
    def rows_needed(self) -> int:
        """Lines the grid needs to show every row (the screen sizes the panes from this)."""
        return len(self._rows) + self.HEADER_LINES

    @property
    def selection(self) -> tuple[str | None, int | None]:
        """(host, GPU index) under the cursor; the GPU is None on a host's header line."""
        if not 0 <= self.cursor < len(self._rows):
            return None, None
        row = self._rows[self.cursor]
        return row.host, (row.gpus[0] if row.gpus else None)

    # -- drawing ---------------------------------------------------------------------------

    def _signature(self, row: Row, host: HostRecord) -> tuple:
        """Everything a row's pixels depend on; an unchanged row is served from the cache."""
        if row.kind == "host":
            age = host.sample_age(self._now)
            return ("h", host.state, host.error, host.gpu_error, host.gpu_source, host.last_sample_time,
                    None if age is None else formatting.coarse_age(age), len(host.gpus), host.reconnects,
                    host.driver, host.cpu_pct, host.load1, host.mem_avail_kib)
        if row.kind == "note":
            return ("n", row.text, row.level)
        return ("g", host.last_sample_time, host.state, tuple(self._jobs.get((host.name, i)) for i in row.gpus),
                tuple(self._leftover_jobs.get((host.name, i)) for i in row.gpus),
                tuple(self._shared.get((host.name, i)) for i in row.gpus))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.base_style
        if y < self.HEADER_LINES:
            style = base + self.get_component_rich_style("gpu-grid--header")
            return self._render_text(self._header_line(width), width, style)
        index = self.scroll_offset.y + y - self.HEADER_LINES
        if index >= len(self._rows) or self._store is None:
            return Strip.blank(width, base)
        row = self._rows[index]
        host = self._store.hosts.get(row.host)
        if host is None:
            return Strip.blank(width, base)
        cursor = index == self.cursor and self.has_focus
        key = (self._signature(row, host), width, cursor, id(self._palette), base)
        cached = self._strips.get(index)
        if cached is not None and cached[0] == key:
            return cached[1]
        strip = self._render_row(row, host, width, cursor, base)
        self._strips[index] = (key, strip)
        return strip

    def _render_row(self, row: Row, host: HostRecord, width: int, cursor: bool, base: Style) -> Strip:
        if row.kind == "host":
            text = self._host_line(host, errors=not row.errors_below)
        elif row.kind == "note":
            text = Text(NOTE_INDENT + row.text, self.palette.style(row.level))
        else:
            text = self._gpu_line(host, row.gpus, width)
        text.truncate(width, overflow="ellipsis")
        style = base
        if cursor:
            style = base + self.get_component_rich_style("gpu-grid--cursor")
        return self._render_text(text, width, style)

    def _host_line(self, host: HostRecord, errors: bool = True) -> Text:
        p = self.palette
        level = levels.host_level(host.state)
        text = Text()
        text.append("▌", p.style(level))
        text.append(host.name, Style(bold=True))
        text.append("  ")
        text.append(state_label(host), p.style(level, bold=level != "host-ok"))
        muted = p.style("muted")
        # What a newcomer looks for first (model, driver, CPU, RAM, power) before where it came from.
        if host.gpus:
            text.append(f" · {len(host.gpus)}× {host.gpu_model or 'GPU'}", muted)
            if host.driver:
                text.append(f" · driver {host.driver}", muted)
        elif host.state == "connected" and host.gpu_source == "none":
            text.append(" · no GPU", muted)
        if host.cpu_pct is not None:
            cores = f"/{host.cpu_count}" if host.cpu_count else ""
            text.append(" · CPU ", muted)
            text.append(f"{host.cpu_pct:.0f}%", p.style(levels.util_level(host.cpu_pct)))
            if host.load1 is not None:
                text.append(f" load {host.load1:.1f}{cores}", muted)
        if host.mem_used_kib is not None and host.mem_total_kib:
            ram_pct = 100.0 * host.mem_used_kib / host.mem_total_kib
            text.append(" · RAM ", muted)
            text.append(f"{host.mem_used_kib / KIB_PER_GIB:.0f}/{host.mem_total_kib / KIB_PER_GIB:.0f}G",
                        p.style(levels.mem_level(ram_pct)))
        if host.gpus:
            total_w = sum(r.latest.power_w or 0 for r in host.gpus.values())
            text.append(f" · {total_w / 1000:.1f} kW", muted)
        if host.gpu_source:
            text.append(f" · {host.gpu_source}", muted)
        age = host.sample_age(self._now)
        if age is not None:
            text.append(f" · {formatting.coarse_age(age)} ago", muted)
        if errors:  # otherwise on the note lines under the header (host_notes)
            if host.error:
                text.append("  ")
                text.append(host.error, p.style(level))
            if host.gpu_error:
                text.append(f"  GPU: {host.gpu_error}", p.style("host-warn"))
        return text

    def _header_line(self, width: int) -> Text:
        """Column names over the GPU cells, aligned with _gpu_cell's fixed widths."""
        cell_width = self._cell_width(width)
        spark = self.spark_width(cell_width)
        label = (f"{'#':>2} " + "util".ljust(spark) + f" {'%':>4} " + "memory".ljust(spark)
                 + f" {'used/tot':>8}" + "".join(f" {m.grid[0]:>{len(m.grid[2])}}" for m in GRID_METRICS) + " job")
        text = Text()
        for n in range(self.columns):
            if n:
                text.append(" " * COLUMN_GAP)
            cell = Text(label)
            cell.truncate(cell_width, pad=n < self.columns - 1)
            text.append_text(cell)
        return text

    def _cell_width(self, width: int) -> int:
        columns = self.columns
        return (width - COLUMN_GAP * (columns - 1)) // columns

    def _gpu_line(self, host: HostRecord, indices: tuple[int, ...], width: int) -> Text:
        cell_width = self._cell_width(width)
        text = Text()
        for n, index in enumerate(indices):
            record = host.gpus.get(index)
            if record is None:
                continue
            if n:
                text.append(" " * COLUMN_GAP)
            cell = self._gpu_cell(host, index, record, cell_width)
            cell.truncate(cell_width, overflow="ellipsis", pad=True)
            text.append_text(cell)
        return text

    def spark_width(self, cell_width: int) -> int:
        return max(4, min(self.history, (cell_width - CELL_FIXED - JOB_MIN) // 2))

    def _gpu_cell(self, host: HostRecord, index: int, record: GpuRecord, cell_width: int) -> Text:
        p = self.palette
        g = record.latest
        stale = host.state != "connected"
        spark = self.spark_width(cell_width)
        empty = p.style("muted", dim=True)
        text = Text()
        text.append(f"{index:>2} ", p.style("muted"))
        text.append_text(sparkline(record.util_history, spark, lambda v: p.style(levels.util_level(v)), empty))
        util = "  - " if g.util_pct is None else f"{g.util_pct:>3.0f}%"
        text.append(f" {util} ", p.style(levels.util_level(g.util_pct), bold=True))
        text.append_text(sparkline(record.mem_history, spark, lambda v: p.style(levels.mem_level(v)), empty))
        if g.mem_used_mib is not None and g.mem_total_mib:
            mem_pct = 100.0 * g.mem_used_mib / g.mem_total_mib
            mem = f"{g.mem_used_mib / MIB_PER_GIB:.0f}/{g.mem_total_mib / MIB_PER_GIB:.0f}G"
        else:
            mem_pct, mem = None, "-"
        text.append(f" {mem:>8}", p.style(levels.mem_level(mem_pct)))
        for metric in GRID_METRICS:
            _, shown, unknown = metric.grid
            value = getattr(g, metric.name)
            text.append(" " + (unknown if value is None else shown.format(value)), p.style(levels.metric_level(metric, g)))
        job = self._jobs.get((host.name, index))
        text.append(" ")
        left = self._leftover_jobs.get((host.name, index))
        if left is not None and g.processes and all((host.name, gp.pid) in self._leftover_pids for gp in g.processes):
            text.append(f"leftovers {left.name}", p.style("leftover", bold=True))
        elif job is not None:
            shared = self._shared.get((host.name, index))
            if shared:  # each job there is judged by its own share of it (the job pane says which)
                text.append(f"{shared} jobs ", p.style("gpu-shared", bold=True))
            text.append(job.name, p.style(levels.phase_variable(job.phase), bold=True))
        elif g.processes:
            text.append(f"{len(g.processes)} proc", p.style("muted"))
        else:
            text.append("-", p.style("muted"))
        if stale:
            text.stylize(Style(dim=True))
        return text

    # -- cursor and mouse -----------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def job_at(self, row_index: int, x: int | None = None) -> str | None:
        if not 0 <= row_index < len(self._rows):
            return None
        row = self._rows[row_index]
        if row.kind != "gpus" or not row.gpus:
            return None
        column = 0
        if x is not None and len(row.gpus) > 1:
            column = min(len(row.gpus) - 1, x // (self._cell_width(self.size.width) + COLUMN_GAP))
        ref = self._jobs.get((row.host, row.gpus[column])) or self._leftover_jobs.get((row.host, row.gpus[column]))
        if ref is None:  # the other GPU on the line may belong to a job
            refs = [self._jobs.get((row.host, i)) for i in row.gpus]
            ref = next((r for r in refs if r is not None), None)
        return None if ref is None else ref.id

    def _move_cursor(self, row: int) -> None:
        self.cursor = max(0, min(len(self._rows) - 1, row))
        # Row n is line n + 1 (under the header); keep the header's line out of the way.
        self.scroll_to_region(Region(0, self.cursor, 1, 1 + self.HEADER_LINES), animate=False, immediate=True)
        self.refresh()
        self.post_message(self.Selected(*self.selection))

    def action_open(self) -> None:
        job_id = self.job_at(self.cursor)
        if job_id is None:
            self.notify("No job on this line", severity="information", timeout=2)
        else:
            self.post_message(self.OpenJob(job_id))

    def on_click(self, event: Click) -> None:
        row = self.scroll_offset.y + event.y - self.HEADER_LINES
        if event.y >= self.HEADER_LINES and 0 <= row < len(self._rows):
            self.cursor = row
            self.refresh()
            self.post_message(self.Selected(*self.selection))
            if event.chain >= 2:
                job_id = self.job_at(row, event.x)
                if job_id is not None:
                    self.post_message(self.OpenJob(job_id))

    COMPONENT_CLASSES = {"gpu-grid--cursor", "gpu-grid--header"}

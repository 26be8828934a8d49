"""Every process holding a GPU, nvitop-style: host, GPU, pid, user, GPU SM %, GPU memory, CPU %, host
memory, running time, the job it belongs to and its command. Sortable (`s` cycles the column, `S` reverses,
a click on a header sorts by it, again reverses); enter opens the process's job. With no GPU process it
says so.

Drawn with the Line API from rows rebuilt once per show(); only visible lines are rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.message import Message
from textual.geometry import Region, Size
from textual.strip import Strip

from ...vocab import MIB_PER_GIB
from .. import levels
from .line_list import CURSOR_BINDINGS, LineList

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...store import Store
    from ...views import JobView

# key, header, width (None: the rest of the line)
COLUMNS = (
    ("host", "Host", 14),
    ("gpu", "GPU", 3),
    ("pid", "PID", 8),
    ("user", "User", 10),
    ("sm", "SM %", 5),
    ("mem", "GPU mem", 8),
    ("cpu", "CPU %", 6),
    ("rss", "Host mem", 8),
    ("time", "Time", 9),
    ("job", "Job", 18),
    ("command", "Command", None),
)
RIGHT = {"gpu", "pid", "sm", "mem", "cpu", "rss", "time"}
EMPTY = "no process holds a GPU on the hosts shown (g: back to the jobs)"
GAP = 1


@dataclass(frozen=True)
class GpuProcessRow:
    host: str
    gpu: int
    pid: int
    user: str | None
    mem_mib: float | None
    cpu_pct: float | None
    job: str | None
    phase: str | None
    command: str
    # its share of the GPU's SM time where the probe read it (a GPU more than one process holds), else the
    # GPU's utilisation when it is the GPU's only process
    sm_pct: float | None = None
    rss_bytes: int | None = None
    started: float | None = None  # unix seconds
    job_id: str | None = None


SORT_KEYS: dict[str, Callable[[GpuProcessRow], Any]] = {
    "host": lambda r: (r.host, r.gpu, r.pid),
    "gpu": lambda r: (r.gpu, r.host),
    "pid": lambda r: r.pid,
    "user": lambda r: (r.user or "", r.host),
    "mem": lambda r: -(r.mem_mib or 0.0),  # biggest first, like nvitop
    "cpu": lambda r: -(r.cpu_pct or 0.0),
    "sm": lambda r: -(r.sm_pct or 0.0),
    "rss": lambda r: -(r.rss_bytes or 0),
    "time": lambda r: r.started if r.started is not None else float("inf"),  # longest running first
    "job": lambda r: (r.job or "~", r.host),
    "command": lambda r: r.command,
}


def gpu_process_rows(store: Store, jobs: list[JobView], host_filter: set[str] | None = None) -> list[GpuProcessRow]:
    """One row per (GPU, process) the GPU sources report; the job is the one whose processes
    include the pid, else the one the GPU belongs to."""
    by_pid = {slot: j for j in jobs for slot in j.pid_slots}
    by_gpu = {slot: j for j in jobs for slot in j.gpu_slots}
    rows = []
    for host in store.hosts.values():
        if host_filter is not None and host.name not in host_filter:
            continue
        for index, record in sorted(host.gpus.items()):
            alone = len(record.latest.processes) == 1
            for proc in record.latest.processes:
                info = host.procs.get(proc.pid)
                job = by_pid.get((host.name, proc.pid))
                if job is None and info is not None:
                    job = by_pid.get((host.name, info.ppid))
                job = job or by_gpu.get((host.name, index))
                command = " ".join(info.cmdline) if info is not None and info.cmdline else (info.name if info else "?")
                rows.append(GpuProcessRow(host.name, index, proc.pid, info.user if info else None, proc.mem_used_mib,
                                          host.proc_cpu_pct.get(proc.pid), job.name if job else None,
                                          job.phase if job else None, command,
                                          sm_pct=proc.sm_pct if proc.sm_pct is not None
                                          else record.latest.util_pct if alone else None,
                                          rss_bytes=info.rss_bytes if info else None,
                                          started=info.start_time if info else None,
                                          job_id=job.id if job else None))
    return rows


def _bytes(count: int) -> str:
    return f"{count / 2**30:.1f}G" if count >= 2**30 else f"{count / 2**20:.0f}M"


def _elapsed(seconds: float) -> str:
    """nvitop's TIME: "12:34" under an hour, "3:12:34" under a day, "2-03:12" beyond."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class GpuProcessTable(LineList, can_focus=True):
    HEADER_LINES = 1
    BINDINGS = [
        Binding("enter", "open", "Open job"),
        Binding("s", "cycle_sort", "Sort", show=False),
        Binding("S", "reverse_sort", "Reverse sort", show=False),
        *CURSOR_BINDINGS,
    ]

    class OpenJob(Message):
        def __init__(self, job_id: str) -> None:
            super().__init__()
            self.job_id = job_id
    COMPONENT_CLASSES = {"gpu-processes--header", "gpu-processes--cursor"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[GpuProcessRow] = []
        self.cursor = 0
        self.sort_column = "mem"
        self.sort_reverse = False
        self._now = 0.0

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def theme_changed(self, palette) -> None:
        self._palette = palette
        self.refresh()

    def show(self, store: Store, jobs: list[JobView], host_filter: set[str] | None = None,
             now: float | None = None) -> None:
        if now is not None and int(now) != int(self._now):
            self._now = now
            self.refresh()  # the running times tick
        rows = gpu_process_rows(store, jobs, host_filter)
        rows.sort(key=SORT_KEYS[self.sort_column], reverse=self.sort_reverse)
        if rows != self.rows:
            self.rows = rows
            self.cursor = max(0, min(self.cursor, len(rows) - 1))
            self.virtual_size = Size(self.size.width, max(1, len(rows)) + self.HEADER_LINES)
            self.refresh()

    def sort_by(self, column: str, reverse: bool = False) -> None:
        self.sort_column, self.sort_reverse = column, reverse
        self.rows = sorted(self.rows, key=SORT_KEYS[column], reverse=reverse)
        self.refresh()

    def action_cycle_sort(self) -> None:
        names = [key for key, _, _ in COLUMNS]
        self.sort_by(names[(names.index(self.sort_column) + 1) % len(names)])

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort_column, not self.sort_reverse)

    def action_open(self) -> None:
        if self.rows and self.rows[self.cursor].job_id is not None:
            self.post_message(self.OpenJob(self.rows[self.cursor].job_id))
        elif self.rows:
            self.app.notify("this process belongs to no job gpuwatch follows", timeout=4)

    def _widths(self, width: int) -> list[tuple[str, str, int]]:
        fixed = sum(w + GAP for _, _, w in COLUMNS if w is not None)
        return [(k, label, w if w is not None else max(7, width - fixed)) for k, label, w in COLUMNS]

    def _line(self, cells: list[tuple[str, Text]], width: int) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for (key, _, column_width), (_, cell) in zip(self._widths(width), cells):
            cell.truncate(column_width, overflow="ellipsis")
            pad = " " * (column_width - cell.cell_len)
            if key in RIGHT:
                text.append(pad)
                text.append_text(cell)
            else:
                text.append_text(cell)
                text.append(pad)
            text.append(" " * GAP)
        return text

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.base_style
        if y == 0:
            labels = []
            for key, label, _ in COLUMNS:
                if key == self.sort_column:
                    label += "▲" if self.sort_reverse else "▼"
                labels.append((key, Text(label)))
            style = base + self.get_component_rich_style("gpu-processes--header")
            return self._render_text(self._line(labels, width), width, style)
        index = int(self.scroll_offset.y) + y - 1
        if not self.rows and index == 0:
            return self._render_text(Text(EMPTY, self.palette.style("muted")), width, base)
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        p = self.palette
        muted = p.style("muted")
        cells = [
            ("host", Text(row.host)),
            ("gpu", Text(str(row.gpu))),
            ("pid", Text(str(row.pid))),
            ("user", Text(row.user or "-", muted if row.user is None else "")),
            ("sm", Text("-" if row.sm_pct is None else f"{row.sm_pct:.0f}", p.style(levels.util_level(row.sm_pct)))),
            ("mem", Text("-" if row.mem_mib is None else f"{row.mem_mib / MIB_PER_GIB:.1f}G")),
            ("cpu", Text("-" if row.cpu_pct is None else f"{row.cpu_pct:.0f}",
                         p.style(levels.util_level(row.cpu_pct)))),
            ("rss", Text("-" if row.rss_bytes is None else _bytes(row.rss_bytes))),
            ("time", Text("-" if row.started is None else _elapsed(self._now - row.started))),
            ("job", Text(row.job or "-", p.style(levels.phase_variable(row.phase or "unknown"), bold=True)
                         if row.job else muted)),
            ("command", Text(row.command, muted)),
        ]
        style = base
        if index == self.cursor and self.has_focus:
            style = base + self.get_component_rich_style("gpu-processes--cursor")
        return self._render_text(self._line(cells, width), width, style)

    def _move_cursor(self, row: int) -> None:
        if not self.rows:
            return
        self.cursor = max(0, min(len(self.rows) - 1, row))
        self.scroll_to_region(Region(0, self.cursor, 1, 2), animate=False, immediate=True)
        self.refresh()

    def column_at(self, x: int) -> str | None:
        left = 0
        for key, _, width in self._widths(self.size.width):
            if x < left + width + GAP:
                return key
            left += width + GAP
        return None

    def on_click(self, event: Click) -> None:
        if event.y == 0:
            column = self.column_at(event.x)
            if column is not None:
                self.sort_by(column, not self.sort_reverse if column == self.sort_column else False)
            return
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self.rows):
            self._move_cursor(row)

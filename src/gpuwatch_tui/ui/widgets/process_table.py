"""The job's processes: pid, state, CPU (percent between updates and total time), memory, command.

The command is cut to the width left by the other columns, ending in "…", so the table never
scrolls sideways (at 80 columns a torchrun command line would otherwise push a scrollbar in).
Hovering a row shows the whole command line as a tooltip.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from ...model import ProcInfo
from ..safe_rich import safe_rich
from .. import formatting

COLUMNS = (("pid", "PID"), ("state", "S"), ("cpu", "CPU%"), ("time", "CPU time"),
           ("rss", "RSS"), ("thr", "Thr"), ("cmd", "Command"))
MIN_COMMAND = 12  # narrower than this and the column could not say much anyway


def ellipsize(text: str, width: int) -> str:
    """`text` cut to `width` cells, its last cell "…" when something was cut."""
    if cell_len(text) <= width:
        return text
    cut = Text(text, no_wrap=True)
    cut.truncate(max(1, width), overflow="ellipsis")
    return cut.plain


class ProcessTable(DataTable):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_cursor=False)
        self._cells: dict[str, tuple] = {}  # row key -> cells as shown (command cut)
        self._commands: dict[str, str] = {}  # row key -> whole command line
        self._command_width = 0
        # process key -> (CPU seconds, sample time, percent shown)
        self._cpu_seen: dict[tuple[int, float], tuple[float, float, str]] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def _cpu_percent(self, proc: ProcInfo, sampled_at: float) -> str:
        """CPU between two samples of the process, over the time between those samples.

        The screen redraws far more often than processes are sampled: between samples the last
        figure stays (dividing by the time since the last redraw would read near zero)."""
        total = proc.cpu_s + proc.cpu_children_s
        before = self._cpu_seen.get(proc.key)
        if before is not None and sampled_at <= before[1]:
            return before[2]
        text = "-" if before is None else f"{100.0 * (total - before[0]) / (sampled_at - before[1]):.0f}"
        self._cpu_seen[proc.key] = (total, sampled_at, text)
        return text

    def command_width(self, rows: list[tuple]) -> int:
        """Cells left for the command once the other columns (and a vertical scrollbar, when
        the rows overflow the table's height) have theirs."""
        pad = 2 * self.cell_padding
        others = sum(max(cell_len(label), *(cell_len(r[n]) for r in rows)) + pad
                     for n, (_, label) in enumerate(COLUMNS[:-1]))
        width = self.size.width - self.styles.gutter.width
        max_height = self.styles.max_height
        visible = int(max_height.value) - 1 if max_height is not None and max_height.is_cells else len(rows)
        if len(rows) > visible:
            width -= self.styles.scrollbar_size_vertical
        return max(MIN_COMMAND, width - others - pad)

    def reset(self) -> None:
        """No rows and nothing remembered (the job pane is reused for another job)."""
        self.clear()
        self._cells.clear()
        self._commands.clear()
        self._cpu_seen.clear()
        self.tooltip = None

    def show(self, procs: list[ProcInfo], now: float, sampled_at: float | None = None) -> None:
        """`sampled_at`: when these process facts were taken (the host's last sample)."""
        sampled_at = now if sampled_at is None else sampled_at
        wanted: dict[str, tuple] = {}
        commands: dict[str, str] = {}
        for proc in procs:
            key = f"{proc.pid}:{proc.start_time}"
            children = f" (+{len(proc.children)} children)" if proc.children else ""
            commands[key] = " ".join(proc.cmdline) + children
            wanted[key] = (
                str(proc.pid),
                proc.state,
                self._cpu_percent(proc, sampled_at),
                formatting.age(proc.cpu_s + proc.cpu_children_s),
                formatting.size(proc.rss_bytes),
                str(proc.threads),
            )
        self._commands = commands
        width = self.command_width(list(wanted.values())) if wanted else self._command_width
        self._command_width = width
        wanted = {key: (*cells, ellipsize(commands[key], width)) for key, cells in wanted.items()}
        for key in [k for k in self._cells if k not in wanted]:
            self.remove_row(key)
            del self._cells[key]
        for key, cells in wanted.items():
            old = self._cells.get(key)
            if old is None:
                self.add_row(*map(safe_rich, cells), key=key)
            else:
                for (column, _), before, after in zip(COLUMNS, old, cells):
                    if before != after:
                        self.update_cell(key, column, safe_rich(after), update_width=column in ("cmd", "cpu", "time"))
            self._cells[key] = cells

    @property
    def last_command_width(self) -> int:
        return self._command_width

    def on_resize(self) -> None:
        self.refresh_commands()

    def refresh_commands(self) -> None:
        """Re-cut the commands for the current width (after a resize)."""
        if not self._cells:
            return
        rows = [cells[:-1] for cells in self._cells.values()]
        width = self.command_width(rows)
        if width == self._command_width:
            return
        self._command_width = width
        for key, cells in self._cells.items():
            cut = ellipsize(self._commands.get(key, cells[-1]), width)
            if cut != cells[-1]:
                self.update_cell(key, "cmd", safe_rich(cut), update_width=True)
                self._cells[key] = (*cells[:-1], cut)

    def full_command(self, row_key: str) -> str | None:
        return self._commands.get(row_key)

    def watch_hover_coordinate(self, old: Coordinate, value: Coordinate) -> None:
        super().watch_hover_coordinate(old, value)
        try:
            row_key, _ = self.coordinate_to_cell_key(value)
        except Exception:  # hovering the header or an empty table
            self.tooltip = None
            return
        command = self._commands.get(row_key.value)
        self.tooltip = safe_rich(command) if command is not None else None

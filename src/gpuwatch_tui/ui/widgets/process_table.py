"""The job's processes: pid, state, CPU (percent between updates and total time), memory, command."""

from __future__ import annotations

from textual.widgets import DataTable

from ...model import ProcInfo
from .. import formatting

COLUMNS = (("pid", "PID"), ("state", "S"), ("cpu", "CPU%"), ("time", "CPU time"),
           ("rss", "RSS"), ("thr", "Thr"), ("cmd", "Command"))


class ProcessTable(DataTable):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_cursor=False)
        self._cells: dict[str, tuple] = {}
        self._cpu_seen: dict[tuple[int, float], tuple[float, float]] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def _cpu_percent(self, proc: ProcInfo, now: float) -> str:
        total = proc.cpu_s + proc.cpu_children_s
        before = self._cpu_seen.get(proc.key)
        self._cpu_seen[proc.key] = (total, now)
        if before is None or now <= before[1]:
            return "-"
        return f"{100.0 * (total - before[0]) / (now - before[1]):.0f}"

    def show(self, procs: list[ProcInfo], now: float) -> None:
        wanted = {}
        for proc in procs:
            children = f" (+{len(proc.children)} children)" if proc.children else ""
            wanted[f"{proc.pid}:{proc.start_time}"] = (
                str(proc.pid),
                proc.state,
                self._cpu_percent(proc, now),
                formatting.age(proc.cpu_s + proc.cpu_children_s),
                formatting.size(proc.rss_bytes),
                str(proc.threads),
                " ".join(proc.cmdline) + children,
            )
        for key in [k for k in self._cells if k not in wanted]:
            self.remove_row(key)
            del self._cells[key]
        for key, cells in wanted.items():
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
            else:
                for (column, _), before, after in zip(COLUMNS, old, cells):
                    if before != after:
                        self.update_cell(key, column, after, update_width=column == "cmd")
            self._cells[key] = cells

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

    def show(self, procs: list[ProcInfo], now: float, sampled_at: float | None = None) -> None:
        """`sampled_at`: when these process facts were taken (the host's last sample)."""
        sampled_at = now if sampled_at is None else sampled_at
        wanted = {}
        for proc in procs:
            children = f" (+{len(proc.children)} children)" if proc.children else ""
            wanted[f"{proc.pid}:{proc.start_time}"] = (
                str(proc.pid),
                proc.state,
                self._cpu_percent(proc, sampled_at),
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

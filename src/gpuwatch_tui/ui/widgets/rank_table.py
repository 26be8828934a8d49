"""The ranks of a job over several hosts: rank, host, pid, GPU, util, process state, last log; the rank
that holds the others up is marked, with why; NCCL RAS's verdict on a rank (from the latest dump) beside it."""

from __future__ import annotations

from ..safe_rich import safe_rich

from rich.text import Text
from textual.widgets import DataTable

from ...views import RankView
from .. import formatting

COLUMNS = (("rank", "Rank"), ("host", "Host"), ("pid", "PID"), ("gpu", "GPU"), ("util", "Util"),
           ("state", "S"), ("log", "Last log"), ("note", ""))
STATE_WORDS = {"T": "T stopped", "D": "D", "Z": "Z zombie", "gone": "gone"}


def rank_cells(r: RankView, now: float, nccl: str = "") -> tuple:
    """`nccl`: NCCL RAS's verdict on this rank from the latest dump ("behind: AllReduce count 6, ..."), if any."""
    util = "-" if r.util_pct is None else f"{r.util_pct:.0f}%" + (f" {r.power_w:.0f}W" if r.power_w else "")
    last = "-" if r.last_log_at is None else formatting.age(max(0.0, now - r.last_log_at)) + " ago"
    note = Text(f"◀ {r.note}", "bold") if r.culprit else ""
    if nccl:
        note = Text.assemble(note, (" " if note else "") + f"NCCL RAS: {nccl}")
    return ("?" if r.rank is None else str(r.rank), r.host, str(r.pid), formatting.gpus(r.gpus), util,
            STATE_WORDS.get(r.state, r.state), last, note)


class RankTable(DataTable):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_cursor=False)
        self._cells: dict[str, tuple] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def reset(self) -> None:
        """No rows (the job pane is reused for another job)."""
        self.clear()
        self._cells = {}

    def show(self, ranks: tuple[RankView, ...], now: float, nccl: dict[int, str] | None = None) -> None:
        nccl = nccl or {}
        wanted = {f"{r.host}:{r.pid}:{r.start_ticks}": rank_cells(r, now, nccl.get(r.rank, "")) for r in ranks}
        if list(wanted) != list(self._cells):  # ranks came or went: rebuild in rank order
            self.clear()
            for key, cells in wanted.items():
                self.add_row(*map(safe_rich, cells), key=key)
        else:
            for key, cells in wanted.items():
                for (column, _), before, after in zip(COLUMNS, self._cells[key], cells):
                    if before != after:
                        self.update_cell(key, column, safe_rich(after), update_width=True)
        self._cells = wanted

"""The Slurm queue under the jobs table (only with [slurm] in the config): running jobs with nodes and
elapsed/limit, pending ones with their reason, ended ones with final state and exit code, and the log
path Slurm gives each. Rows come ready from slurm/display.py; this widget only draws them."""

from __future__ import annotations

from ..safe_rich import safe_rich

from rich.text import Text
from textual.widgets import DataTable

from ...slurm.display import COLUMNS, QueueRow
from ..palette import Palette, Themed


class SlurmQueueTable(Themed, DataTable):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", show_cursor=False, zebra_stripes=False)
        self._rows: dict[str, QueueRow] = {}
        self.border_title = "Slurm"

    def on_mount(self) -> None:
        for label in COLUMNS:
            self.add_column(label, key=label)

    def _cells(self, row: QueueRow) -> tuple:
        state = Text(row.cells[2], style=self.palette.style(row.state_variable, bold=True))
        return (*row.cells[:2], state, *row.cells[3:])

    def show(self, rows: list[QueueRow], note: str | None = None) -> None:
        """Redraw from `rows` (order kept); `note` (a failed read) goes in the border."""
        self.border_subtitle = note or ""
        if [r.key for r in rows] != list(self._rows):
            self.clear()
            self._rows = {}
            for row in rows:
                self.add_row(*map(safe_rich, self._cells(row)), key=row.key)
                self._rows[row.key] = row
            return
        for row in rows:
            old = self._rows[row.key]
            if old == row:
                continue
            for label, before, after in zip(COLUMNS, old.cells, row.cells):
                if before != after or (label == "STATE" and old.state_variable != row.state_variable):
                    value = self._cells(row)[COLUMNS.index(label)]
                    self.update_cell(row.key, label, safe_rich(value), update_width=True)
            self._rows[row.key] = row

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        rows, self._rows = list(self._rows.values()), {}
        self.clear()
        self.show(rows, self.border_subtitle or None)

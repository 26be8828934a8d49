"""The jobs table: updated in place by row key (only changed cells are touched), sortable.

`s` cycles the sort column, clicking a header sorts by it (again: reverse).
"""

from __future__ import annotations

from typing import Any, Callable

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from .. import formatting, levels
from ..palette import Palette

COLUMNS = (
    ("host", "Host"),
    ("job", "Job"),
    ("gpus", "GPUs"),
    ("phase", "Phase"),
    ("since", "Since"),
    ("progress", "Progress"),
    ("rate", "Rate"),
    ("loss", "Loss"),
    ("eta", "ETA"),
)


class KeyedText(Text):
    """A cell that remembers its job, so sorting can use the job's real values, not the text."""

    job_id: str = ""


def _progress_fraction(job: dict) -> float:
    p = job.get("progress") or {}
    if p.get("step") is not None and p.get("total"):
        return p["step"] / p["total"]
    return -1.0


SORT_KEYS: dict[str, Callable[[dict], Any]] = {
    "host": lambda j: (j.get("host") or "", j.get("name") or ""),
    "job": lambda j: (j.get("name") or "", j.get("host") or ""),
    "gpus": lambda j: (len(j.get("gpus") or ()), j.get("host") or ""),
    "phase": lambda j: (levels.PHASE_URGENCY.get(j.get("phase"), 99), j.get("host") or ""),
    "since": lambda j: -(j.get("since") or 0.0),  # longest in its phase first
    "progress": lambda j: -_progress_fraction(j),
    "rate": lambda j: -((j.get("progress") or {}).get("rate") or 0.0),
    "loss": lambda j: (j.get("progress") or {}).get("loss") or float("inf"),
    "eta": lambda j: (j.get("progress") or {}).get("eta_s") or float("inf"),
}


class JobsTable(DataTable):
    BINDINGS = [
        Binding("enter", "select_cursor", "Open"),
        Binding("s", "cycle_sort", "Sort", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._jobs: dict[str, dict] = {}
        self._cells: dict[str, tuple] = {}
        self._shown_at = float("-inf")
        self._palette: Palette | None = None
        self.sort_column: str | None = None
        self.sort_reverse = False

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @property
    def palette(self) -> Palette:
        if self._palette is None:
            self._palette = Palette(self.app.theme_variables)
        return self._palette

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self._cells = {key: () for key in self._cells}  # recolour every cell on next show
        self._shown_at = float("-inf")

    @property
    def selected_job_id(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:
            return None
        return row_key.value

    def _cells_for(self, job: dict, now: float) -> tuple:
        p = self.palette
        progress = job.get("progress") or {}
        phase = job.get("phase") or "unknown"
        phase_text = phase + (f" ({job['detail']})" if job.get("detail") else "")
        name = KeyedText(job.get("name") or job["id"])
        name.job_id = job["id"]
        since = job.get("since")
        return (
            job.get("host") or "",
            name,
            formatting.gpus(job.get("gpus")),
            Text(phase_text, p.style(levels.phase_variable(phase), bold=True)),
            formatting.age(None if since is None else now - since),
            formatting.progress(progress),
            formatting.rate(progress),
            formatting.loss(progress),
            formatting.duration(progress.get("eta_s")),
        )

    def show(self, jobs: list[dict], now: float, force: bool = False) -> None:
        """Bring the table to `jobs`: add, remove and update cells by key; never rebuild.

        Cells have one-second resolution, so with the same set of jobs this runs at most once a
        second of the source's clock (each run re-renders the visible rows).
        """
        wanted = {job["id"]: job for job in jobs}
        if not force and wanted.keys() == self._jobs.keys() and 0 <= now - self._shown_at < 1.0:
            return
        self._shown_at = now
        for job_id in [k for k in self._cells if k not in wanted]:
            self.remove_row(job_id)
            del self._cells[job_id]
        added = False
        order_changed = False
        for job_id, job in wanted.items():
            cells = self._cells_for(job, now)
            old = self._cells.get(job_id)
            if old is None:
                self.add_row(*cells, key=job_id)
                added = True
            else:
                for (column, _), before, after in zip(COLUMNS, old, cells):
                    if before != after:
                        self.update_cell(job_id, column, after)
                        if column == self.sort_column:
                            order_changed = True
            self._cells[job_id] = cells
        self._jobs = wanted
        if self.sort_column and (added or order_changed):
            self._apply_sort()

    def _apply_sort(self) -> None:
        if not self.sort_column:
            return
        key = SORT_KEYS[self.sort_column]
        jobs = self._jobs
        selected = self.selected_job_id
        self.sort("job", key=lambda cell: key(jobs.get(cell.job_id, {})), reverse=self.sort_reverse)
        if selected is not None and selected in jobs:
            self.move_cursor(row=self.get_row_index(selected), animate=False)

    def sort_by(self, column: str, reverse: bool = False) -> None:
        self.sort_column = column
        self.sort_reverse = reverse
        self._apply_sort()
        self.notify(f"Sorted by {column}{' (reversed)' if reverse else ''}", timeout=1.5)

    def action_cycle_sort(self) -> None:
        names = [key for key, _ in COLUMNS]
        current = names.index(self.sort_column) if self.sort_column in names else -1
        self.sort_by(names[(current + 1) % len(names)])

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = event.column_key.value
        reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_by(column, reverse)

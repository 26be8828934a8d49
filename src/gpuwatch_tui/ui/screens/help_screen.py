"""`?`: every key binding, gathered from the action registry and the classes that declare keys
(so the list cannot drift)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..bindings import binding_for
from ..widgets.gpu_grid import GpuGrid
from ..widgets.jobs_table import JobsTable
from ..widgets.log_view import LogView
from .dashboard import DashboardScreen
from .job_screen import JobScreen


def binding_rows(app) -> list[tuple[str, str, str]]:
    """(where, key, what) for every binding gpuwatch declares; the app-wide ones are the registry's
    actions this dashboard offers (read-only mode lists no key it would refuse)."""
    places = (
        ("everywhere", [binding_for(spec) for spec in app.offered_actions()]),
        ("dashboard", DashboardScreen.BINDINGS), ("GPU grid", GpuGrid.BINDINGS), ("jobs table", JobsTable.BINDINGS),
        ("job pane", JobScreen.BINDINGS), ("job log", LogView.BINDINGS), ("help", HelpScreen.BINDINGS),
    )
    rows = []
    for where, bindings in places:
        for binding in bindings:
            if not isinstance(binding, Binding):
                binding = Binding(*binding)
            for key in binding.key.split(","):
                display = binding.key_display or app.get_key_display(Binding(key.strip(), binding.action))
                rows.append((where, display, binding.description or binding.action))
    rows.append(("everywhere", app.get_key_display(Binding(app.COMMAND_PALETTE_BINDING, "command_palette")),
                 "Command palette"))
    rows.append(("everywhere", "mouse", "click selects, double-click opens, wheel scrolls, click a header sorts"))
    return rows


class HelpScreen(ModalScreen):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", key_display="?"),
    ]

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=False, show_header=True, header_style="bold", pad_edge=False)
        table.add_column("where")
        table.add_column("key", style="bold")
        table.add_column("does")
        for where, key, what in binding_rows(self.app):
            table.add_row(where, key, what)
        with VerticalScroll(id="help-box"):
            yield Static(Text("gpuwatch keys", style="bold"), id="help-title")
            yield Static(table, id="help-table")

    def action_dismiss(self) -> None:
        self.app.pop_screen()

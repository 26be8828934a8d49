"""`w`: who uses what, over every host (see widgets/users_table.py). Redrawn as samples arrive."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..palette import Palette
from ...safe_text import safe_text
from ..widgets.users_table import user_rows, users_table


class UsersScreen(ModalScreen):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("w", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="users-box"):
            yield Static(Text("Who uses what · every host", style="bold"), id="users-title")
            yield Static(id="users-table")

    def on_mount(self) -> None:
        self._draw()

    def refresh_from_source(self) -> None:
        if self.is_mounted:
            self._draw()

    def _draw(self) -> None:
        source = self.app.source
        palette = Palette(self.app.theme_variables)
        rows = user_rows(source.store, source.jobs())
        for row in rows:  # user names come from the hosts
            row.user = safe_text(row.user)
        self.query_one("#users-table", Static).update(users_table(rows, palette, source.store.history))

    def theme_changed(self, palette: Palette) -> None:
        self.refresh_from_source()

    def action_dismiss(self) -> None:
        self.app.pop_screen()

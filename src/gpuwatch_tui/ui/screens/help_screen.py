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

from ...vocab import PHASES
from ..bindings import binding_for
from ..palette import Palette
from ..widgets.gpu_grid import GpuGrid
from ..widgets.gpu_processes import GpuProcessTable
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
        ("GPU processes", GpuProcessTable.BINDINGS),
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
    rows.append(("everywhere", app.get_key_display(Binding("ctrl+c", "quit")), "Quit (as in htop, k9s, nvitop)"))
    rows.append(("everywhere", app.get_key_display(Binding(app.COMMAND_PALETTE_BINDING, "command_palette")),
                 "Command palette"))
    rows.append(("everywhere", "mouse", "click selects, double-click opens, wheel scrolls, click a header sorts"))
    return rows


# What each phase means, for the legend (the contract in one line each).
PHASE_MEANINGS = {
    "starting": "process up, nothing logged yet", "loading": "reading data or weights",
    "compiling": "torch.compile / kernels being built", "training": "steps logged", "evaluating": "eval loop",
    "checkpointing": "writing a checkpoint", "silent": "working (GPU/CPU busy) but not logging: buffered stdout?",
    "stalled": "no sign of progress past the threshold: a hang, a spinning collective",
    "crashed": "ended badly (signal, OOM, traceback)", "finished": "ended cleanly", "unknown": "not enough facts yet",
}
LEVELS = (
    ("util-idle", "GPU util < 5%"), ("util-low", "< 50%"), ("util-mid", "< 85%"), ("util-high", ">= 85%"),
    ("mem-mid", "GPU memory >= 50%"), ("mem-high", ">= 90%"), ("temp-warm", ">= 70°C"), ("temp-hot", ">= 83°C"),
    ("host-ok", "host connected"), ("host-warn", "connecting, stale"), ("host-bad", "unreachable, key, auth"),
)


def legend(palette: Palette) -> Text:
    """The colours the dashboard uses, each drawn in its own colour, and what every phase means."""
    text = Text()
    text.append("Colours\n", style="bold")
    for n, (variable, meaning) in enumerate(LEVELS):
        text.append("  ██ ", style=palette.style(variable))
        text.append(meaning)
        text.append("\n" if n % 4 == 3 or n == len(LEVELS) - 1 else "   ")
    text.append("\nPhases\n", style="bold")
    for phase in PHASES:
        text.append(f"  {phase:<14}", style=palette.style(f"phase-{phase}", bold=True))
        text.append(PHASE_MEANINGS.get(phase, "") + "\n")
    return text


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
            yield Static(legend(Palette(self.app.theme_variables)), id="help-legend")

    def action_dismiss(self) -> None:
        self.app.pop_screen()

"""Entry point for cli.py: build the app on a source and run it in this terminal."""

from __future__ import annotations

from pathlib import Path

from .app import GpuwatchApp
from .source import DashboardSource
from .theme_files import DEFAULT_THEME


def run_dashboard(
    source: DashboardSource,
    *,
    theme: str = DEFAULT_THEME,
    themes_dir: Path | None = None,
    readonly: bool = False,
    history: int = 60,
) -> int:
    """Run the dashboard until the user quits; returns the process exit code."""
    app = GpuwatchApp(source, theme=theme, themes_dir=themes_dir, readonly=readonly, history=history)
    result = app.run()
    return result if isinstance(result, int) else (app.return_code or 0)

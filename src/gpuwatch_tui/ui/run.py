"""Entry point for cli.py: build the app on a source, wire its alerts, and run it in this terminal."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from platformdirs import user_config_dir

from ..config import Config
from .app import GpuwatchApp
from .monitor_source import MonitorSource
from .theme_files import DEFAULT_THEME


def user_themes_dir() -> Path:
    return Path(user_config_dir("gpuwatch")) / "themes"


def build_app(
    source,
    *,
    theme: str | None = None,
    themes_dir: Path | None = None,
    readonly: bool = False,
    history: int | None = None,
    alert_write: Callable[[bytes], None] | None = None,
    min_refresh_interval: float = 0.25,
) -> GpuwatchApp:
    """The dashboard app on `source`: a DashboardSource, or a loaded Config (then the live Monitor
    is built here). A live source with [alerts] rules sends them to the app's toast and, with
    `alert_write` (the controlling terminal), to the bell and desktop notification too."""
    if isinstance(source, Config):
        config = source
        history = history or config.settings.history
        theme = theme or config.settings.theme
        themes_dir = themes_dir or user_themes_dir()
        source = MonitorSource(config=config)  # the Monitor is built after the first frame
    app = GpuwatchApp(source, theme=theme or DEFAULT_THEME, themes_dir=themes_dir, readonly=readonly,
                      history=history or 60, min_refresh_interval=min_refresh_interval)
    if isinstance(source, MonitorSource):  # a live source (a recording has no alerts to raise)
        source.enable_alerts(app.show_alert, alert_write)
    return app


def run_dashboard(
    source,
    *,
    theme: str | None = None,
    themes_dir: Path | None = None,
    readonly: bool = False,
    history: int | None = None,
) -> int:
    """Run the dashboard until the user quits; returns the process exit code."""
    alert_write = None
    # the live config's [alerts] (with `[settings] record` too): the alert machinery only when used
    config = source if isinstance(source, Config) else source.config if isinstance(source, MonitorSource) else None
    if config is not None and config.alerts.enabled:
        from ..alerts import terminal_writer

        alert_write = terminal_writer()
    app = build_app(source, theme=theme, themes_dir=themes_dir, readonly=readonly, history=history,
                    alert_write=alert_write)
    result = app.run()
    return result if isinstance(result, int) else (app.return_code or 0)

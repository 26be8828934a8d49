"""Alerts: rules over jobs, hosts and GPUs, and the sinks they go to (no Textual here).

Names are loaded on first use: the config reads only `alerts.settings`, and the dashboard's first
frame should not wait for the dispatcher, the sinks and their imports.
"""

from __future__ import annotations

from ..lazy_exports import lazy_exports

_HOMES = {
    "AlertDispatcher": ".dispatch", "AlertEngine": ".engine", "HostFacts": ".engine", "TRIGGERS": ".triggers",
    "AlertEvent": ".events", "AlertRunner": ".runner", "build_sinks": ".runner", "terminal_writer": ".runner",
    "AlertRule": ".settings", "AlertsConfig": ".settings", "parse_alerts": ".settings",
    "desktop_notification": ".terminal",
}

__all__ = ["AlertDispatcher", "AlertEngine", "AlertEvent", "AlertRule", "AlertRunner", "AlertsConfig",
           "HostFacts", "TRIGGERS", "build_sinks", "desktop_notification", "parse_alerts", "terminal_writer"]


__getattr__ = lazy_exports(__name__, _HOMES)

"""Alerts: rules over jobs, hosts and GPUs, and the sinks they go to (no Textual here)."""

from .dispatch import AlertDispatcher
from .engine import AlertEngine, HostFacts
from .events import TRIGGERS, AlertEvent
from .runner import AlertRunner, build_sinks, terminal_writer
from .settings import AlertRule, AlertsConfig, parse_alerts
from .terminal import desktop_notification

__all__ = ["AlertDispatcher", "AlertEngine", "AlertEvent", "AlertRule", "AlertRunner", "AlertsConfig",
           "HostFacts", "TRIGGERS", "build_sinks", "desktop_notification", "parse_alerts", "terminal_writer"]

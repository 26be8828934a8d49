"""The [alerts] config: rules (global and per job) and sink settings, every mistake naming its key.

    [alerts]
    sinks = ["toast", "bell"]        # where rules send by default
    debounce = "30s"                 # how long stalled/silent/host-down must hold before they fire
    repeat_after = "15m"             # the same alert for the same job/host/GPU at most this often
    [alerts.webhook]                 # Slack-compatible
    url = "https://hooks.slack.com/services/..."
    [alerts.hook]
    command = ["/usr/local/bin/page-me", "--json"]
    [[alerts.rules]]
    on = "crashed"                   # crashed stalled silent finished host-down gpu-spin
    job = "train-.*"                 # optional regexes on job name / host name
    sinks = ["webhook", "bell"]

and per job: `alerts = ["crashed", "stalled"]` in a [[jobs]] table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..config_records import unknown_key_warning
from ..errors import ConfigError
from ..vocab import parse_duration
from .triggers import JOB_TRIGGERS, TRIGGERS

SINK_NAMES = ("toast", "bell", "desktop", "hook", "webhook")
TERMINALS = ("auto", "osc777", "osc9", "osc99", "bell")
DEFAULT_SINKS = ("toast", "bell")


@dataclass(frozen=True)
class AlertRule:
    on: str  # one of TRIGGERS
    name: str = ""
    job: str | None = None  # regex on the job name (full match)
    host: str | None = None  # regex on the host name (full match)
    hold_s: float | None = None  # the condition must hold this long (None: the trigger's default)
    sinks: tuple[str, ...] = DEFAULT_SINKS
    util_pct: float = 95.0  # gpu-spin: at least this utilisation...
    idle_power_frac: float = 0.3  # ...at no more than this fraction of the power limit

    def matches(self, host: str, job: str | None) -> bool:
        if self.host is not None and not re.fullmatch(self.host, host):
            return False
        if self.job is not None and (job is None or not re.fullmatch(self.job, job)):
            return False
        return True


@dataclass(frozen=True)
class WebhookSettings:
    url: str
    timeout_s: float = 5.0
    retries: int = 3
    per_minute: int = 10


@dataclass(frozen=True)
class HookSettings:
    command: tuple[str, ...]
    timeout_s: float = 10.0
    per_minute: int = 30


@dataclass(frozen=True)
class AlertsConfig:
    rules: tuple[AlertRule, ...] = ()
    debounce_s: float = 30.0
    repeat_after_s: float = 900.0
    terminal: str = "auto"
    webhook: WebhookSettings | None = None
    hook: HookSettings | None = None
    gpu_spin_s: float = 300.0

    @property
    def enabled(self) -> bool:
        return bool(self.rules)


def _table(value: Any, file: str, key: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(file, key, "a table", value)
    return value


def _unknown(table: dict, known: set[str], file: str, key: str, warnings: list[str]) -> None:
    for name in table:
        if name not in known:
            warnings.append(unknown_key_warning(file, f"{key}.{name}", name, known))


def _sinks(value: Any, file: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v in SINK_NAMES for v in value):
        raise ConfigError(file, key, "a list of sinks from " + ", ".join(SINK_NAMES), value)
    return tuple(value)


def _regex(value: Any, file: str, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(file, key, "a regular expression string", value)
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigError(file, key, f"a regular expression ({exc})", value) from None
    return value


def _number(table: dict, name: str, default: float, lo: float, hi: float, file: str, key: str) -> float:
    value = table.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ConfigError(file, f"{key}.{name}", f"a number from {lo:g} to {hi:g}", value)
    return float(value)


def parse_rule(table: Any, file: str, key: str, default_sinks: tuple[str, ...], warnings: list[str]) -> AlertRule:
    table = _table(table, file, key)
    _unknown(table, {"on", "name", "job", "host", "for", "sinks", "util_pct", "idle_power_frac"}, file, key, warnings)
    on = table.get("on")
    if on not in TRIGGERS:
        raise ConfigError(file, f"{key}.on", "one of " + ", ".join(TRIGGERS), on)
    name = table.get("name", on)
    if not isinstance(name, str):
        raise ConfigError(file, f"{key}.name", "a string", name)
    hold = parse_duration(table["for"], file, f"{key}.for") if "for" in table else None
    return AlertRule(
        on=on, name=name, job=_regex(table.get("job"), file, f"{key}.job"),
        host=_regex(table.get("host"), file, f"{key}.host"), hold_s=hold,
        sinks=_sinks(table["sinks"], file, f"{key}.sinks") if "sinks" in table else default_sinks,
        util_pct=_number(table, "util_pct", 95.0, 1, 100, file, key),
        idle_power_frac=_number(table, "idle_power_frac", 0.3, 0.01, 1, file, key),
    )


def parse_alerts(data: Any, jobs: list[tuple[str, str, Any]], file: str, warnings: list[str]) -> AlertsConfig:
    """data: the [alerts] table (or None); jobs: (job name, host name, its `alerts` value or None)."""
    table = _table(data, file, "alerts") if data is not None else {}
    _unknown(table, {"sinks", "debounce", "repeat_after", "terminal", "webhook", "hook", "rules", "gpu_spin_for"},
             file, "alerts", warnings)
    default_sinks = _sinks(table["sinks"], file, "alerts.sinks") if "sinks" in table else DEFAULT_SINKS
    terminal = table.get("terminal", "auto")
    if terminal not in TERMINALS:
        raise ConfigError(file, "alerts.terminal", "one of " + ", ".join(TERMINALS), terminal)
    webhook = None
    if "webhook" in table:
        w = _table(table["webhook"], file, "alerts.webhook")
        _unknown(w, {"url", "timeout", "retries", "per_minute"}, file, "alerts.webhook", warnings)
        url = w.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://[^\s/]+", url):
            raise ConfigError(file, "alerts.webhook.url", "an http:// or https:// URL", url)
        webhook = WebhookSettings(
            url=url,
            timeout_s=parse_duration(w["timeout"], file, "alerts.webhook.timeout") if "timeout" in w else 5.0,
            retries=int(_number(w, "retries", 3, 0, 10, file, "alerts.webhook")),
            per_minute=int(_number(w, "per_minute", 10, 1, 600, file, "alerts.webhook")),
        )
    hook = None
    if "hook" in table:
        h = _table(table["hook"], file, "alerts.hook")
        _unknown(h, {"command", "timeout", "per_minute"}, file, "alerts.hook", warnings)
        command = h.get("command")
        # An argv list, run without a shell: nothing from an alert ever becomes shell words.
        if not isinstance(command, list) or not command or not all(isinstance(c, str) and c for c in command):
            raise ConfigError(file, "alerts.hook.command", 'a list of program and arguments, e.g. ["/usr/local/bin/page-me"]', command)
        hook = HookSettings(
            command=tuple(command),
            timeout_s=parse_duration(h["timeout"], file, "alerts.hook.timeout") if "timeout" in h else 10.0,
            per_minute=int(_number(h, "per_minute", 30, 1, 600, file, "alerts.hook")),
        )
    rules_raw = table.get("rules", [])
    if not isinstance(rules_raw, list):
        raise ConfigError(file, "alerts.rules", "an array of tables written [[alerts.rules]]", rules_raw)
    rules = [parse_rule(t, file, f"alerts.rules[{i}]", default_sinks, warnings) for i, t in enumerate(rules_raw)]
    for i, (job, host, value) in enumerate(jobs):
        if value is None:
            continue
        key = f"jobs[{i}].alerts"
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(v in JOB_TRIGGERS for v in value):
            raise ConfigError(file, key, "a list of phases from " + ", ".join(JOB_TRIGGERS), value)
        rules += [AlertRule(on=v, name=f"{job}:{v}", job=re.escape(job), host=re.escape(host), sinks=default_sinks)
                  for v in value]
    for rule in rules:
        if "webhook" in rule.sinks and webhook is None:
            raise ConfigError(file, "alerts.webhook.url", "a webhook URL (a rule sends to `webhook`)")
        if "hook" in rule.sinks and hook is None:
            raise ConfigError(file, "alerts.hook.command", "a command (a rule sends to `hook`)")
    return AlertsConfig(
        rules=tuple(rules),
        debounce_s=parse_duration(table["debounce"], file, "alerts.debounce") if "debounce" in table else 30.0,
        repeat_after_s=parse_duration(table["repeat_after"], file, "alerts.repeat_after") if "repeat_after" in table else 900.0,
        terminal=terminal, webhook=webhook, hook=hook,
        gpu_spin_s=parse_duration(table["gpu_spin_for"], file, "alerts.gpu_spin_for") if "gpu_spin_for" in table else 300.0,
    )



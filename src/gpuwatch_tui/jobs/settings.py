"""Settings the job code needs, as plain dataclasses the config module fills from TOML."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from .rules import Rule

DEFAULT_STALL_AFTER_S = 300.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object, file: str = "<config>", key: str = "stall_after") -> float:
    """Seconds from 300, 300.0, "300", "90s", "5m", "1h30m", "1d". Raises ConfigError otherwise."""
    expected = 'a duration: seconds (e.g. 300) or a string such as "90s", "5m", "1h30m"'
    if isinstance(value, bool):
        raise ConfigError(file, key, expected, value)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        elif text and re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+", text):
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
        else:
            raise ConfigError(file, key, expected, value)
    else:
        raise ConfigError(file, key, expected, value)
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ConfigError(file, key, "a positive duration", value)
    return seconds


@dataclass(frozen=True)
class JobSpec:
    """A configured `[[jobs]]` entry: found by cmdline regex or pid file instead of by GPU use."""

    name: str
    host: str
    match: str | None = None  # regex searched in the space-joined cmdline
    pid_file: str | None = None
    logs: tuple[str, ...] = ()  # empty: wherever stdout/stderr point
    output_dir: str | None = None
    stall_after_s: float | None = None  # None: the global setting

    def __post_init__(self) -> None:
        # Accept a list from the config module; keep the dataclass hashable.
        object.__setattr__(self, "logs", tuple(self.logs))


@dataclass(frozen=True)
class JobSettings:
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    tail_lines: int = 500  # lines kept per log, ready when a job is opened
    max_line_chars: int = 2000  # longer lines are cut, with a marker
    partial_stale_s: float = 2.0  # an unterminated last line is shown after this long
    tail_backlog_bytes: int = 256 * 1024  # how far back the probe starts a new tail
    finished_keep: bool = True  # ended jobs stay until dismissed
    jobs: tuple[JobSpec, ...] = ()
    rules: tuple["Rule", ...] = ()  # user rules, tried before the built-in pack
    # Per-job stall thresholds for discovered jobs, by job name (e.g. {"train.py": 900}).
    stall_after_by_name: dict[str, float] = field(default_factory=dict)

    def stall_after_for(self, name: str, spec: JobSpec | None = None) -> float:
        if spec is not None and spec.stall_after_s is not None:
            return spec.stall_after_s
        return self.stall_after_by_name.get(name, self.stall_after_s)

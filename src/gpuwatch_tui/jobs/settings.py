"""Settings the job code needs, as plain dataclasses the config module fills from TOML."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

# parse_duration is re-exported for the callers that read settings from here; it lives in vocab.
from ..vocab import DEFAULT_STALL_AFTER_S, parse_duration  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    from .rules import Rule


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
    jobs: tuple[JobSpec, ...] = ()
    rules: tuple["Rule", ...] = ()  # user rules, tried before the built-in pack

    def stall_after_for(self, spec: JobSpec | None = None) -> float:
        """A configured job's own stall_after, else the global one."""
        if spec is not None and spec.stall_after_s is not None:
            return spec.stall_after_s
        return self.stall_after_s

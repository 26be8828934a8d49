"""Build a JobTracker from the app's Config (the only place that knows both shapes)."""

from __future__ import annotations

from .rules import parse_rules
from .settings import JobSettings, JobSpec
from .tracker import JobTracker


def spec_from_config(j) -> JobSpec:
    """The engine's JobSpec of one [[jobs]] entry (config.JobConfig)."""
    return JobSpec(j.name, j.host, j.match, j.pid_file, tuple(j.logs), j.output_dir, j.stall_after)


def settings_from_config(config) -> JobSettings:
    s = config.settings
    specs = tuple(spec_from_config(j) for j in config.jobs)
    rules = tuple(parse_rules(list(config.rules), config.path or "<config>"))
    return JobSettings(stall_after_s=float(s.stall_after), tail_lines=int(s.tail_lines), jobs=specs, rules=rules)


def make_tracker(config) -> JobTracker:
    return JobTracker(settings_from_config(config))

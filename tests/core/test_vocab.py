"""The one vocabulary: the phase list matches the README and the themes, units read one way."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from gpuwatch_tui import vocab
from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.ui import formatting

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_readme_phase_table_lists_exactly_the_vocabulary_phases_in_order():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("| phase | means |", 1)[1].split("\n\n", 1)[0]
    first_column = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    listed = [name for cell in first_column for name in re.findall(r"`([a-z-]+)`", cell)]
    assert listed == list(vocab.PHASES)


@pytest.mark.parametrize("theme", sorted((ROOT / "themes").glob("*.toml")), ids=lambda p: p.stem)
def test_every_phase_has_a_colour_in_every_theme(theme):
    variables = tomllib.loads(theme.read_text())["variables"]
    assert {f"phase-{p}" for p in vocab.PHASES} <= set(variables)


def test_phase_groups_use_only_known_phases():
    assert set(vocab.PHASE_URGENCY) == set(vocab.PHASES)
    assert vocab.ENDED_PHASES <= set(vocab.PHASES) and set(vocab.LOG_PHASES) <= set(vocab.PHASES)
    assert vocab.HOST_OK_STATES | vocab.HOST_WARN_STATES | vocab.HOST_TERMINAL_STATES == set(vocab.HOST_STATES)
    assert not vocab.HOST_TERMINAL_STATES & (vocab.HOST_OK_STATES | vocab.HOST_WARN_STATES)


def test_the_old_homes_are_the_same_objects():
    from gpuwatch_tui import config, model
    from gpuwatch_tui.jobs import settings
    from gpuwatch_tui.ui import levels

    assert model.HOST_STATES is vocab.HOST_STATES and levels.PHASES is vocab.PHASES
    assert settings.parse_duration is config.parse_duration is vocab.parse_duration
    assert settings.JobSettings().stall_after_s == config.Settings().stall_after == vocab.DEFAULT_STALL_AFTER_S


@pytest.mark.parametrize("value,seconds", [(300, 300), ("90s", 90), ("1h30m", 5400), ("1h 30m", 5400),
                                           ("1.5h", 5400), ("250ms", 0.25), ("2d", 172800)])
def test_parse_duration(value, seconds):
    assert vocab.parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "soon", "5 parsecs", "1h30", 0, -5, float("inf"), float("nan"), False])
def test_parse_duration_rejects_with_file_and_key(value):
    with pytest.raises(ConfigError) as info:
        vocab.parse_duration(value, "hosts.toml", "jobs[0].stall_after")
    assert (info.value.file, info.value.key) == ("hosts.toml", "jobs[0].stall_after")
    assert "duration" in str(info.value)


def _previous_ui_age(seconds):
    """ui/formatting.age as it was before it moved into vocab (rounding, not truncating)."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d{seconds % 86400 // 3600:02.0f}h"


def test_ui_age_reads_as_before_for_whole_seconds_and_tenths():
    cases = [None, 0, 0.4, 9.94, 10, 59, 60, 85, 432, 3599, 3600, 3 * 3600 + 60, 86399, 90000, 10 * 86400]
    cases += [t / 10 for t in range(0, 100)]
    for seconds in cases:
        assert formatting.age(seconds) == _previous_ui_age(seconds), seconds


def test_ui_age_no_longer_rounds_up_into_the_next_unit():
    assert _previous_ui_age(119.6) == "1m60s"  # what it used to print
    assert formatting.age(119.6) == "1m59s"
    assert formatting.age(59.7) == "59s"


def test_engine_and_ui_durations_agree_past_ten_seconds():
    for seconds in (10, 61, 1120, 3 * 3600 + 60, 2 * 86400 + 4 * 3600):
        assert vocab.fmt_duration(seconds) == formatting.age(seconds)
    assert vocab.fmt_duration(1120) == "18m40s" and vocab.fmt_duration(None) == "?" and formatting.age(None) == "-"


def test_clock_and_bytes():
    assert formatting.eta(3723) == "1:02:03" and formatting.eta(754) == "12:34"
    assert formatting.eta(None) == "-" and vocab.fmt_clock(float("inf")) == "-"
    assert formatting.size(512) == "512 B" and formatting.size(1.3e12) == "1.3 TB" and formatting.size(None) == "-"
    assert formatting.coarse_age(0.4) == "<1s" and formatting.coarse_age(42.9) == "42s"

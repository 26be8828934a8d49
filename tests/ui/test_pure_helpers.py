"""Formatting, levels and sparklines: pure functions the widgets draw with."""

from __future__ import annotations

from rich.style import Style

from gpuwatch_tui.ui import formatting, levels
from gpuwatch_tui.ui.sparkline import sparkline
from gpuwatch_tui.views import ProgressView


def test_levels():
    assert levels.util_level(0) == "util-idle"
    assert levels.util_level(30) == "util-low"
    assert levels.util_level(70) == "util-mid"
    assert levels.util_level(98) == "util-high"
    assert levels.temp_level(90) == "temp-hot"
    assert levels.host_level("auth-failed") == "host-bad"
    assert levels.host_level("reconnecting") == "host-warn"
    assert levels.phase_variable("stalled") == "phase-stalled"
    assert levels.phase_variable("nonsense") == "phase-unknown"


def test_formatting():
    assert formatting.age(3.25) == "3.2s"
    assert formatting.coarse_age(0.4) == "<1s" and formatting.coarse_age(7.9) == "7s"
    assert formatting.age(432) == "7m12s"
    assert formatting.age(8712) == "2h25m"
    assert formatting.eta(20265) == "5:37:45" and formatting.eta(35999) == "9:59:59"
    assert formatting.eta(36000) == "10h00m" and formatting.eta(99871) == "1d03h"  # never cut by the column
    assert formatting.eta(None) == "-" and formatting.eta(float("inf")) == "-"
    assert formatting.gpus([0, 1, 2, 3]) == "0-3"
    assert formatting.gpus([0, 2]) == "0,2"
    assert formatting.progress(ProgressView(step=50, total=200)) == "50/200 25%"
    assert formatting.rate(ProgressView(rate=2.94, unit="it")) == "2.9 it/s"
    assert formatting.rate(ProgressView(rate=4.97, unit="it/s")) == "5.0 it/s"  # the tracker's full units
    assert formatting.rate(ProgressView(rate=1.3, unit="s/it")) == "1.3 s/it"
    assert formatting.rate(ProgressView(rate=2_420_000.0, unit="tok/s")) == "2.4M tok/s"
    assert formatting.rate(ProgressView(rate=621.4, unit="samples/s")) == "621 samples/s"
    assert formatting.size(1_284_000_000_000) == "1.3 TB"


def test_sparkline_is_right_aligned_and_bounded():
    plain = Style()
    text = sparkline([0, 50, 100], 5, lambda v: plain)
    assert text.plain == "··▁▄█"
    assert len(sparkline(range(100), 10, lambda v: plain)) == 10


def test_host_bar_summary_counts_states_gpus_busy_and_power():
    from gpuwatch_tui.ui.recorded_source import RecordedSource
    from gpuwatch_tui.ui.widgets.host_bar import fleet_summary

    from .conftest import FLEET

    states, gpus, busy, watts = fleet_summary(RecordedSource(FLEET).store)
    assert states == {"connected": 3, "unreachable": 1, "host-key-unknown": 1}
    assert gpus == 13
    assert busy == 10  # 8 training + the spinning rank + sft-nohup; idle GPUs are not busy
    assert 6000 < watts < 7000

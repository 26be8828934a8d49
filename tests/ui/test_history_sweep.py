"""The history charts sweep: a sample keeps its column as new ones arrive, so a new sample changes one
slot of the chart (the terminal is sent that, not the chart), and the head wraps to the left."""

from __future__ import annotations

from gpuwatch_tui.ui import levels
from gpuwatch_tui.ui.palette import Palette
from gpuwatch_tui.ui.widgets.history_view import AXIS, Series, chart_rows, head_axis, sweep_slots
from gpuwatch_tui.ui.levels import FALLBACK_VARIABLES


def rows(values, newest, width=30, height=4, window=10):
    series = Series("", tuple(values), 100.0, "%", levels.util_level)
    return [t.plain[AXIS:] for t in chart_rows(series, width, height, window, newest, Palette(FALLBACK_VARIABLES))]


def changed_columns(a: list[str], b: list[str]) -> set[int]:
    return {x for la, lb in zip(a, b) for x, (ca, cb) in enumerate(zip(la, lb)) if ca != cb}


def test_a_new_sample_changes_only_its_own_slot_once_the_window_is_full():
    history = [float(10 * (i % 10)) for i in range(40)]
    each, slots = sweep_slots(30, 10)
    assert (each, slots) == (3, 10)
    before = rows(history[-10:], newest=38)  # sample numbers 29..38
    after = rows(history[-9:] + [55.0], newest=39)  # 39 arrives; 29 leaves the window
    assert changed_columns(before, after) <= {27, 28, 29}  # slot 39 % 10 = 9: columns 27-29 only


def test_the_head_wraps_and_older_samples_stay_put():
    first = rows([100.0] * 5, newest=4)  # sample numbers 0..4: slots 0-4 filled, 5-9 empty
    assert first[-1][:15] == "█" * 15 and set(first[-1][15:]) == {"·"}
    wrapped = rows([100.0] * 9 + [0.0], newest=10)  # 10 lands in slot 0; 1..9 where they were
    assert wrapped[0][:3] == "   " and wrapped[-1][:3] == "▁▁▁" and wrapped[-1][3:] == "█" * 27
    assert "▲" in head_axis(30, 10, 10, "")[AXIS:AXIS + 3].plain

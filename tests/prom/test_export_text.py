"""The export's fast text (families.render) is exactly what prometheus-client's generate_latest
writes for the same families: odd label values, special floats, empty families, other collectors."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.registry import Collector

from gpuwatch_tui.export.families import FastGauge, LabelText, render

ODD_VALUES = ['plain', 'with "quotes"', "back\\slash", "new\nline", "ünïcödé ✓", "", "a,b=c}{"]
NUMBERS = [0, 1, 0.0, 1.0, -1.5, 71230 * 1024 * 1024, 1e-9, 12345678.9, float("inf"), float("-inf"), float("nan")]


class Families(Collector):
    def __init__(self) -> None:
        self.label_text = LabelText()

    def collect(self):
        self.label_text.next_scrape()
        odd = FastGauge("t_odd_labels", 'help with \\ and\nnewline', ["zeta", "alpha", "host"], self.label_text)
        for i, value in enumerate(ODD_VALUES):
            odd.add_metric([value, str(i), "h"], i)
        nums = FastGauge("t_numbers", "numbers", ["i"], self.label_text)
        for i, number in enumerate(NUMBERS):
            nums.add_metric((str(i),), number)
        empty = FastGauge("t_empty", "no series", ["host"], self.label_text)
        return [odd, nums, empty]


def test_render_is_generate_latests_text():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families())
    Counter("t_other_things", "from another collector", ["kind"], registry=registry).labels("x").inc(3)
    for _ in range(3):  # fresh, then from the label cache (twice: both generations)
        fast = render(registry)
        assert fast == generate_latest(registry)
    text = fast.decode()
    assert 't_odd_labels{alpha="1",host="h",zeta="with \\"quotes\\""} 1.0' in text
    assert 't_numbers{i="8"} +Inf' in text and "# TYPE t_empty gauge" in text and "t_other_things_total" in text


def test_label_cache_forgets_series_that_went_away():
    cache = LabelText()
    cache.text(("host",), ("gone",))
    cache.next_scrape()
    cache.text(("host",), ("kept",))
    cache.next_scrape()
    cache.text(("host",), ("kept",))
    cache.next_scrape()
    assert (("host",), ("gone",)) not in {**cache._current, **cache._previous}
    assert set(cache._previous) == {(("host",), ("kept",))}

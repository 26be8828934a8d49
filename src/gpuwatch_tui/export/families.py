"""Gauge families that render their own exposition text fast, identical to prometheus-client's.

prometheus-client's `generate_latest` escapes and sorts every label of every sample on every scrape;
at 128 hosts x 8 GPUs x 8 jobs (~22k series) that alone took ~300 ms of a ~400 ms scrape, on the
loop that feeds the monitor. Here a series' label part (`{gpu="0",host="n1",...}`, escaped by
prometheus-client's own functions, keys sorted as it sorts them) is built once and reused across
scrapes while the series lives; a scrape then only formats the values. `render` writes exactly the
text `generate_latest` writes (a test compares them byte for byte); families from other collectors
(gpuwatch's own process metrics) still go through `generate_latest`.
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString
from prometheus_client.metrics_core import Metric


class LabelText:
    """Label tuples -> their rendered `{...}` text, kept for the series seen in the last two scrapes
    (a series that went away is forgotten after one more scrape: the cache stays as big as the page)."""

    def __init__(self) -> None:
        self._current: dict[tuple, str] = {}
        self._previous: dict[tuple, str] = {}

    def text(self, names: tuple[str, ...], values: tuple[str, ...]) -> str:
        key = (names, values)
        found = self._current.get(key)
        if found is None:
            found = self._previous.get(key)
            if found is None:
                found = _render_labels(names, values)
            self._current[key] = found
        return found

    def next_scrape(self) -> None:
        self._previous, self._current = self._current, {}


def _render_labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    # As generate_latest writes them (legacy name escaping, UTF-8 values, keys sorted).
    pairs = sorted(zip(names, values))
    return "{" + ",".join('{}="{}"'.format(openmetrics.escape_label_name(k, openmetrics.UNDERSCORES),
                                           openmetrics._escape(v, openmetrics.ALLOWUTF8, False))
                          for k, v in pairs) + "}"


def _value_text(value: float) -> str:
    # Most exported values are a state set's 0 and 1: skip the general formatter for them.
    if value == 0:
        return "0.0"
    if value == 1:
        return "1.0"
    return floatToGoString(value)


class FastGauge(Metric):
    """A gauge family whose rows are (label values, value): no Sample objects unless someone asks
    for `samples` (prometheus-client's own encoders do, and get the same series)."""

    def __init__(self, name: str, documentation: str, labels: list[str], label_text: LabelText) -> None:
        super().__init__(name, documentation, "gauge")
        self.label_names = tuple(labels)
        self.rows: list[tuple[tuple[str, ...], float]] = []
        self._label_text = label_text

    def add_metric(self, labels, value: float) -> None:
        # Tuples as they come (the collector builds them); the value is made a float when rendered.
        self.rows.append((labels if type(labels) is tuple else tuple(labels), value))

    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]
        return [Sample(self.name, dict(zip(self.label_names, values)), float(value))
                for values, value in self.rows]

    @samples.setter
    def samples(self, _value) -> None:
        pass  # Metric.__init__ sets an empty list; the rows are the truth

    def render(self) -> str:
        name = openmetrics.escape_metric_name(self.name, openmetrics.UNDERSCORES)
        doc = self.documentation.replace("\\", r"\\").replace("\n", r"\n")
        text = self._label_text.text
        names = self.label_names
        lines = [f"# HELP {name} {doc}\n# TYPE {name} gauge\n"]
        lines += [f"{name}{text(names, values)} {_value_text(value)}\n" for values, value in self.rows]
        return "".join(lines)


class _One(Collector):
    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self):
        return [self.metric]


def render(registry: Collector) -> bytes:
    """The registry's families in the Prometheus text format (what `generate_latest` gives)."""
    parts = []
    for metric in registry.collect():
        if isinstance(metric, FastGauge):
            parts.append(metric.render())
        else:
            parts.append(generate_latest(_One(metric)).decode("utf-8"))
    return "".join(parts).encode("utf-8")

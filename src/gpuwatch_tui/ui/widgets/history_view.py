"""A larger history of the selected GPU (or of a whole host): utilisation, memory and power over
the history window, one chart each, with a y axis and a shared time axis.

It takes the screen's spare rows (few jobs, or none), so it is drawn from the store's ring
buffers once per new sample or selection, never per frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from ..safe_rich import safe_rich
from textual.widget import Widget

from ...probe import gpu_metrics
from ...vocab import MIB_PER_GIB
from .. import levels
from ..palette import Palette, Themed

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...store import HostRecord, Store

BLOCKS = " ▁▂▃▄▅▆▇█"
AXIS = 6  # "100% │" / " 700W│": the y-axis label and its rule
MIN_CHART_ROWS = 2


@dataclass(frozen=True)
class Series:
    label: str  # "util 98%"
    values: tuple[float | None, ...]  # oldest first
    top: float  # the value at the top of the chart
    unit: str  # "%" or "W"
    level: Callable[[float | None], str]  # value -> theme variable


def _by_summary(metric: str) -> Callable[[list[float | None]], float | None]:
    """How a host's GPUs make one figure of `metric` at one instant: its summary rule (gpu_metrics)."""
    return lambda values: gpu_metrics.summarise(metric, values)


def _columns(history: list[list[float | None]], combine) -> tuple[float | None, ...]:
    """One value per time step across GPUs (histories are aligned at their newest sample)."""
    length = max((len(h) for h in history), default=0)
    out = []
    for back in range(length, 0, -1):
        out.append(combine([h[-back] if back <= len(h) else None for h in history]))
    return tuple(out)


def series_for(host: HostRecord, gpu: int | None) -> list[Series]:
    """The three charts for one GPU, or for the whole host (each metric by its summary rule: mean util and
    memory, summed power)."""
    records = [host.gpus[gpu]] if gpu is not None and gpu in host.gpus else list(host.gpus.values())
    if not records:
        return []
    util = _columns([list(r.util_history) for r in records], _by_summary("util_pct"))
    mem = _columns([list(r.mem_history) for r in records], _by_summary("mem_used_mib"))
    power = _columns([list(r.power_history) for r in records], _by_summary("power_w"))
    limit = sum(r.latest.power_limit_w or 0.0 for r in records) or max((v or 0.0 for v in power), default=0.0) or 1.0
    used = sum(r.latest.mem_used_mib or 0.0 for r in records) / MIB_PER_GIB
    total = sum(r.latest.mem_total_mib or 0.0 for r in records) / MIB_PER_GIB

    def last(values):
        return next((v for v in reversed(values) if v is not None), None)

    def pct(value):
        return "-" if value is None else f"{value:.0f}%"

    watts = last(power)
    return [
        Series(f"utilisation {pct(last(util))}", util, 100.0, "%", levels.util_level),
        Series(f"memory {pct(last(mem))}  {used:.0f}/{total:.0f} GiB", mem, 100.0, "%", levels.mem_level),
        Series(f"power {'-' if watts is None else f'{watts:.0f} W'} of {limit:.0f} W", power, limit, "W",
               lambda v: levels.util_level(None if v is None else 100.0 * v / limit)),
    ]


def host_series(host: HostRecord) -> list[Series]:
    """CPU and RAM of the host itself: what the charts show on a host without GPUs."""
    cpu, ram = tuple(host.cpu_history), tuple(host.ram_history)
    if not any(v is not None for v in cpu + ram):
        return []
    cores = f" of {host.cpu_count} cores" if host.cpu_count else ""
    load = f"  load {host.load1:.1f}" if host.load1 is not None else ""
    used, total = host.mem_used_kib, host.mem_total_kib

    def pct(value):
        return "-" if value is None else f"{value:.0f}%"

    ram_label = f"RAM {pct(ram[-1] if ram else None)}"
    if used is not None and total:
        ram_label += f"  {used / 2**20:.1f}/{total / 2**20:.1f} GiB"
    return [
        Series(f"CPU {pct(cpu[-1] if cpu else None)}{cores}{load}", cpu, 100.0, "%", levels.util_level),
        Series(ram_label, ram, 100.0, "%", levels.mem_level),
    ]


def chart_rows(series: Series, width: int, height: int, window: int, palette: Palette) -> list[Text]:
    """`height` lines of bars, newest at the right; the window's `window` samples span `width`
    columns. A missing sample is a gap (a dim dot on the base line), not a zero."""
    values = series.values[-window:]
    offset = window - len(values)  # samples not yet taken sit at the left
    cells: list[tuple[int, Style | None]] = []  # eighths filled, style; -1: no data
    for column in range(width):
        slot = column * window // width - offset
        value = values[slot] if 0 <= slot < len(values) else None
        if value is None:
            cells.append((-1, palette.style("muted", dim=True)))
            continue
        fraction = max(0.0, min(1.0, value / series.top)) if series.top > 0 else 0.0
        eighths = max(1, round(fraction * height * 8))  # a measured zero still shows
        cells.append((eighths, palette.style(series.level(value))))
    muted = palette.style("muted")
    rows = []
    for row in range(height):  # top row first
        floor = (height - 1 - row) * 8
        if row == 0:
            label = f"{series.top:.0f}{series.unit}" if series.unit == "W" else "100%"
        elif row == height - 1:
            label = f"0{series.unit}"
        else:
            label = ""
        text = Text(label.rjust(AXIS - 1)[-(AXIS - 1):] + "│", muted)
        # One span per run of equal style, not per cell: a chart is thousands of cells, and each
        # span costs in every repaint (~100 ms a full chart on a shared core, seen on going back
        # from a job pane).
        run: list[str] = []
        run_style: Style | None = None
        for eighths, style in cells:
            if style != run_style and run:
                text.append("".join(run), run_style)
                run = []
            run_style = style
            if eighths < 0:
                run.append("·" if row == height - 1 else " ")
            else:
                run.append(BLOCKS[max(0, min(8, eighths - floor))])
        if run:
            text.append("".join(run), run_style)
        rows.append(text)
    return rows


def time_axis(width: int, window_s: int) -> Text:
    """"-60s        -45s ...        now" under the charts."""
    line = [" "] * width
    marks = 4 if width >= 40 else 2
    for n in range(marks + 1):
        seconds = window_s - n * window_s // marks
        label = "now" if seconds == 0 else f"-{seconds}s"
        at = n * (width - 1) // marks
        start = max(0, min(width - len(label), at - (len(label) // 2 if 0 < n < marks else 0)))
        if n == marks:
            start = width - len(label)
        line[start:start + len(label)] = label
    return Text(" " * AXIS + "".join(line))


class HistoryView(Themed, Widget):
    """Charts of the host or GPU the GPU grid's cursor is on."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store: Store | None = None
        self.host: str | None = None
        self.gpu: int | None = None
        self._shown: tuple = ()
        self._text: Text | None = None

    def select(self, host: str | None, gpu: int | None) -> None:
        if (host, gpu) != (self.host, self.gpu):
            self.host, self.gpu = host, gpu
            self._text = None
            self.refresh()

    def show(self, store: Store) -> None:
        self._store = store
        record = store.hosts.get(self.host) if self.host else None
        shown = (self.host, self.gpu, None if record is None else record.last_sample_time, id(self._palette))
        if shown != self._shown:
            self._shown = shown
            self._text = None
            self.refresh()

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self._text = None
        self.refresh()

    def on_resize(self) -> None:
        self._text = None

    def render(self) -> Text:
        if self._text is None:
            self._text = safe_rich(self._build(self.content_size.width, self.content_size.height))
        return self._text

    def _build(self, width: int, height: int) -> Text:
        p = self.palette
        store = self._store
        host = store.hosts.get(self.host) if store is not None and self.host else None
        if host is None:
            return Text("history: select a host or GPU in the grid", p.style("muted"))
        window = store.history
        charts = series_for(host, self.gpu)
        if charts:
            what = f"GPU {self.gpu}" if self.gpu is not None else f"all {len(host.gpus)} GPUs"
            about = f" · {host.gpu_model or ''} · last {window} s"
        else:  # no GPU (or none reported yet): the host's own CPU and RAM fill the space instead
            charts = host_series(host)
            what = "no GPU"
            about = f" · CPU and RAM · last {window} s"
        title = Text()
        title.append("History ", Style(bold=True))
        title.append(f"{host.name} · {what}", Style(bold=True))
        title.append(about, p.style("muted"))
        if not charts:
            title.append("  (no samples yet)", p.style("muted"))
            return title
        # title + per chart (label + rows) + time axis
        count = len(charts)
        while count > 1 and (height - 2 - count) // count < MIN_CHART_ROWS:
            count -= 1
        rows_each = max(1, (height - 2 - count) // count)
        spare = max(0, height - 2 - count * (rows_each + 1))
        plot_width = max(1, width - AXIS)
        lines = [title]
        for n, series in enumerate(charts[:count]):
            extra = 1 if n < spare else 0  # spread leftover rows so none stay blank
            lines.append(Text(" " * AXIS + series.label, p.style("muted", bold=True)))
            lines.extend(chart_rows(series, plot_width, rows_each + extra, window, p))
        lines.append(time_axis(plot_width, window))
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "crop"
        return text

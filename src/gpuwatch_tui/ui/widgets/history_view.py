"""The history under the grid: what people look for there. On a host, one small chart per GPU (its
utilisation, labelled with memory and power); on one GPU, its utilisation, memory and power charts; on a
host without GPUs, its CPU and RAM.

The charts sweep: a sample keeps its column, the newest is written at a head that moves right and wraps
(a patient monitor's trace), so each second changes one column per chart, not the whole chart, and the
terminal is sent only that column (terminal_diff). It takes the screen's spare rows and is drawn from the
store's ring buffers once per new sample or selection, never per frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from ..safe_rich import safe_rich
from textual.widget import Widget

from ...probe import gpu_metrics
from ...vocab import MIB_PER_GIB
from .. import levels
from ..palette import Palette, Themed

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...store import HostRecord, Store

BLOCKS = " ▁▂▃▄▅▆▇█"
GAP = chr(0xF0000)  # a slot's code when it has no sample (a slot's code is otherwise chr(its eighths filled))


class _RowGlyphs(dict):
    """One chart row's glyph for each slot code, for str.translate: a row `base` eighths above the floor
    shows what of a bar reaches past it; a gap is blank, a dim dot on the bottom row."""

    def __init__(self, base: int, bottom: bool) -> None:
        super().__init__()
        self.base, self.bottom = base, bottom

    def __missing__(self, code: int) -> str:
        if code == ord(GAP):
            glyph = "·" if self.bottom else " "
        else:
            glyph = BLOCKS[max(0, min(8, code - self.base))]
        self[code] = glyph
        return glyph


@lru_cache(maxsize=None)  # one per row height in eighths: bounded by the terminal's height
def _row_glyphs(base: int, bottom: bool) -> _RowGlyphs:
    return _RowGlyphs(base, bottom)
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
    if len(history) == 1:  # one GPU: every summary rule gives each value back
        return tuple(history[0])
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
    gpm = gpm_note(records[0].latest) if len(records) == 1 else ""
    return [
        Series(f"utilisation {pct(last(util))}{gpm}", util, 100.0, "%", levels.util_level),
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


def sweep_slots(width: int, window: int) -> tuple[int, int]:
    """(columns per sample, sample slots) of a sweep chart `width` columns wide showing `window` samples.
    One slot per sample of the window, so a new sample lands on the one a window older (in steady state
    most of its cells do not change); columns left over at the right stay blank."""
    each = max(1, width // max(1, window))
    return each, max(1, min(window, width // each))


Run = tuple[str, "Style | None"]  # a piece of a line in one style


def chart_runs(series: Series, width: int, height: int, window: int, newest: int,
               palette: Palette) -> list[list[Run]]:
    """`height` lines of bars for a sweep chart, as runs of text in one style: sample number i (counted
    since the host was first seen) sits in slot i mod slots, so the newest, number `newest`, is at the head
    and everything older keeps its column. A slot whose sample is missing or older than the window is a gap
    (a dim dot on the base line), not a zero.

    Built as one string of slot codes that each row translates to its glyphs (str.translate, at C speed;
    rows every bar fills or none reaches are not translated), without rich.Text: this runs every second for
    thousands of cells, and only bar glyphs and numbers are drawn here."""
    values = series.values[-window:]
    each, slots = sweep_slots(width, window)
    head = newest % slots
    gap_style = palette.style("muted", dim=True)
    codes: list[str] = []  # one per slot
    styles: list[Style | None] = []
    for slot in range(slots):
        age = (head - slot) % slots  # 0: the newest sample
        value = values[len(values) - 1 - age] if age < len(values) else None
        if value is None:
            codes.append(GAP)
            styles.append(gap_style)
            continue
        fraction = max(0.0, min(1.0, value / series.top)) if series.top > 0 else 0.0
        codes.append(chr(max(1, round(fraction * height * 8))))  # a measured zero still shows
        styles.append(palette.style(series.level(value)))  # cached by the palette: equal styles are one object
    # Columns left over at the right are gaps.
    spare = width - slots * each
    measured = [ord(code) for code in codes if code != GAP]
    lowest, highest = (min(measured), max(measured)) if measured else (0, 0)
    every_slot = len(measured) == slots
    slot_codes = "".join(code * each for code in codes)
    if spare > 0:
        codes.append(GAP)
        styles.append(gap_style)
    widths = [each] * slots + ([spare] if spare > 0 else [])
    # One run per stretch of equal style, not per cell: each run costs in every repaint.
    spans: list[tuple[int, int, Style | None]] = []
    start = at = 0
    for n, style in enumerate(styles):
        if n and style is not styles[n - 1] and style != styles[n - 1]:
            spans.append((start, at, styles[n - 1]))
            start = at
        at += widths[n]
    spans.append((start, at, styles[-1]))
    muted = palette.style("muted")
    on_muted = {style: muted + style for _, _, style in spans}  # the line's base style is muted
    rows = []
    for row in range(height):  # top row first; a row is the slots' codes translated to its glyphs
        if row == 0:
            label = f"{series.top:.0f}{series.unit}" if series.unit == "W" else "100%"
        elif row == height - 1:
            label = f"0{series.unit}"
        else:
            label = ""
        base, bottom = (height - 1 - row) * 8, row == height - 1
        # Most rows of a steady chart are all full or all empty: only the rows the bars end in are translated.
        if every_slot and base + 8 <= lowest:
            line = BLOCKS[8] * len(slot_codes)
        elif base >= highest and not bottom:
            line = " " * len(slot_codes)
        else:
            line = slot_codes.translate(_row_glyphs(base, bottom))
        if spare > 0:
            line += ("·" if bottom else " ") * spare
        rows.append([(label.rjust(AXIS - 1)[-(AXIS - 1):] + "│", muted),
                     *((line[a:b], on_muted[style]) for a, b, style in spans)])
    return rows


def chart_rows(series: Series, width: int, height: int, window: int, newest: int, palette: Palette) -> list[Text]:
    """chart_runs as rich Text lines."""
    rows = []
    for runs in chart_runs(series, width, height, window, newest, palette):
        text = Text()
        for piece, style in runs:
            text.append(piece, style)
        rows.append(text)
    return rows


def text_runs(text: Text, console) -> list[Run]:
    """A one-line Text as runs, its own style under each span's (Text.render leaves that to the caller)."""
    base = console.get_style(text.style) if isinstance(text.style, str) else text.style
    return [(seg.text, base + seg.style if seg.style else base)
            for seg in text.render(console) if seg.text != "\n"]


def head_axis(width: int, window: int, newest: int, interval_note: str) -> Text:
    """The line under a sweep chart: `▲ now` under the newest sample, and how far back the chart reaches."""
    each, slots = sweep_slots(width, window)
    at = min(width - 1, (newest % slots) * each + each - 1)
    line = [" "] * width
    line[at] = "▲"
    label = "now"
    start = at + 2 if at + 2 + len(label) <= width else max(0, at - 1 - len(label))
    line[start:start + len(label)] = label
    note = interval_note
    if len(note) + 2 <= width:
        free_left = start > len(note) + 2 and at > len(note) + 2
        where = 0 if free_left else width - len(note)
        if where == 0 or where > at + 2 + len(label):
            line[where:where + len(note)] = note
    return Text(" " * AXIS + "".join(line))


def gpm_note(latest) -> str:
    """" · SM 94% · tensor 91%" where the GPU's GPM counters were read: what its util figure hides (a kernel
    that waits in a collective is 100% util with ~0 SM activity)."""
    if latest.sm_active_pct is None:
        return ""
    note = f" · SM {latest.sm_active_pct:.0f}%"
    if latest.tensor_active_pct is not None:
        note += f" · tensor {latest.tensor_active_pct:.0f}%"
    return note


def _gpu_label(index: int, record) -> str:
    """"GPU 3 98% · mem 61% · 690 W · SM 94% · tensor 91%" from a GPU's latest sample."""
    latest = record.latest

    def pct(value):
        return "-" if value is None else f"{value:.0f}%"

    mem = None
    if latest.mem_used_mib is not None and latest.mem_total_mib:
        mem = 100.0 * latest.mem_used_mib / latest.mem_total_mib
    watts = "-" if latest.power_w is None else f"{latest.power_w:.0f} W"
    return f"GPU {index} {pct(latest.util_pct)} · mem {pct(mem)} · {watts}{gpm_note(latest)}"


def _columns_of(panels: int, height: int, width: int) -> int:
    """How many side-by-side columns of small charts: the fewest that give each chart two rows of bars."""
    for columns in (1, 2, 4, 8):
        per_column = -(-panels // columns)
        if height // per_column - 1 >= 2 or (width - columns + 1) // (columns * 2) < AXIS + 10:
            return columns
    return 8


class HistoryView(Themed, Widget):
    """Charts of the host or GPU the GPU grid's cursor is on.

    Drawn with the Line API from lines built once per new sample or selection; a new sample repaints
    only the lines it changed (with a sweep, the head's column), not the widget."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store: Store | None = None
        self.host: str | None = None
        self.gpu: int | None = None
        self._shown: tuple = ()
        self._lines: list[Strip] | None = None
        self._built_for: tuple = ()
        # Line number -> (its runs, its strip): a line whose runs did not change keeps its strip (in steady
        # state most chart rows are the same full or empty blocks every second).
        self._drawn: dict[int, tuple[list, Strip]] = {}

    def select(self, host: str | None, gpu: int | None) -> None:
        if (host, gpu) != (self.host, self.gpu):
            self.host, self.gpu = host, gpu
            self._lines = None
            self.refresh()

    def show(self, store: Store) -> None:
        self._store = store
        record = store.hosts.get(self.host) if self.host else None
        shown = (self.host, self.gpu, None if record is None else record.last_sample_time, id(self._palette))
        if shown == self._shown:
            return
        self._shown = shown
        old = self._lines
        if old is None or self._built_for != self._geometry():
            self._lines = None
            self.refresh()
            return
        self._lines = new = self._strips()
        if len(new) != len(old):  # lines appeared or went (first samples, a chart more or less): all of it
            self.refresh()
            return
        width = self.size.width
        for y, (before, after) in enumerate(zip(old, new)):
            if before is not after and before != after:
                self.refresh(Region(0, y, width, 1))

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self._lines = None
        self._drawn = {}
        self.refresh()

    def on_resize(self) -> None:
        self._lines = None

    def _geometry(self) -> tuple:
        return (self.content_size.width, self.content_size.height, self.rich_style)

    def _strips(self) -> list[Strip]:
        """The widget's lines, on the widget's background, each `width` cells. Text lines (titles and labels
        carry host names and GPU models) are sanitised; chart rows are bar glyphs and numbers, drawn as is."""
        width, height = self.content_size.width, self.content_size.height
        base = self.rich_style
        geometry = self._geometry()
        if geometry != self._built_for:
            self._drawn = {}
        self._built_for = geometry
        drawn = self._drawn
        console = self.app.console
        combined: dict = {}

        def on_base(style):
            if style is None:
                return base
            result = combined.get(style)
            if result is None:
                result = combined[style] = base + style
            return result

        strips = []
        for y, line in enumerate(self._build(width, height)[:height]):
            runs = text_runs(safe_rich(line), console) if isinstance(line, Text) else line
            kept = drawn.get(y)
            if kept is not None and kept[0] == runs:
                strips.append(kept[1])
                continue
            segments = [Segment(piece, on_base(style)) for piece, style in runs if piece]
            strip = Strip(segments).extend_cell_length(width, base).crop(0, width)
            drawn[y] = (runs, strip)
            strips.append(strip)
        return strips

    def render_line(self, y: int) -> Strip:
        if self._lines is None:
            self._lines = self._strips()
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.content_size.width, self.rich_style)

    def _build(self, width: int, height: int) -> list[Text | list[Run]]:
        p = self.palette
        store = self._store
        host = store.hosts.get(self.host) if store is not None and self.host else None
        if host is None:
            return [Text("history: select a host or GPU in the grid", p.style("muted"))]
        window = store.history
        newest = max(0, host.samples_seen - 1)
        title = Text()
        title.append("History ", Style(bold=True))
        if self.gpu is None and len(host.gpus) > 1:
            title.append(f"{host.name} · each GPU's utilisation", Style(bold=True))
            title.append(f" · {host.gpu_model or ''} · last {window} samples · a GPU in the grid: its memory and "
                         "power", p.style("muted"))
            return self._small_multiples(title, host, width, height, window, newest)
        charts = series_for(host, self.gpu)
        if charts:
            what = f"GPU {self.gpu}" if self.gpu is not None else f"all {len(host.gpus)} GPUs"
            about = f" · {host.gpu_model or ''} · last {window} samples"
        else:  # no GPU (or none reported yet): the host's own CPU and RAM fill the space instead
            charts = host_series(host)
            what = "no GPU"
            about = f" · CPU and RAM · last {window} samples"
        title.append(f"{host.name} · {what}", Style(bold=True))
        title.append(about, p.style("muted"))
        if not charts:
            title.append("  (no samples yet)", p.style("muted"))
            return [title]
        # title + per chart (label + rows) + the head's line
        count = len(charts)
        while count > 1 and (height - 2 - count) // count < MIN_CHART_ROWS:
            count -= 1
        rows_each = max(1, (height - 2 - count) // count)
        spare = max(0, height - 2 - count * (rows_each + 1))
        plot_width = max(1, width - AXIS)
        lines: list[Text | list[Run]] = [title]
        for n, series in enumerate(charts[:count]):
            extra = 1 if n < spare else 0  # spread leftover rows so none stay blank
            lines.append(Text(" " * AXIS + series.label, p.style("muted", bold=True)))
            lines.extend(chart_runs(series, plot_width, rows_each + extra, window, newest, p))
        lines.append(head_axis(plot_width, window, newest, "sweeps left to right, the oldest after ▲"))
        return lines

    def _small_multiples(self, title: Text, host: HostRecord, width: int, height: int, window: int,
                         newest: int) -> list[Text | list[Run]]:
        """One utilisation chart per GPU, in as many side-by-side columns as give each two rows of bars."""
        p = self.palette
        indices = sorted(host.gpus)
        rows_left = max(1, height - 2)  # the title and the head's line
        columns = _columns_of(len(indices), rows_left, width)
        per_column = -(-len(indices) // columns)
        rows_each = max(1, rows_left // per_column - 1)
        panel_width = max(AXIS + 2, (width - (columns - 1)) // columns)
        plot_width = panel_width - AXIS
        spare = max(0, rows_left - per_column * (rows_each + 1))  # spread so no row stays blank
        lines: list[Text | list[Run]] = [title]
        console = self.app.console
        for top in range(per_column):  # GPUs in reading order: 0 1 2 3 on the first row of panels
            tall = rows_each + (1 if top < spare else 0)
            group = []
            for index in indices[top * columns:(top + 1) * columns]:
                record = host.gpus[index]
                series = Series("", tuple(record.util_history), 100.0, "%", levels.util_level)
                label = Text(_gpu_label(index, record), p.style("muted", bold=True))  # numbers only
                label.truncate(panel_width, overflow="ellipsis", pad=True)
                label_runs = text_runs(label, console)
                group.append([label_runs, *chart_runs(series, plot_width, tall, window, newest, p)])
            for line_no in range(tall + 1):
                line: list[Run] = []
                for n, panel in enumerate(group):
                    if n:
                        line.append((" ", None))
                    line.extend(panel[line_no])
                lines.append(line)
        axis = Text()
        for column in range(min(columns, len(indices))):
            piece = head_axis(plot_width, window, newest, "sweeps left to right")
            piece.truncate(panel_width, pad=True)
            if column:
                axis.append(" ")
            axis.append_text(piece)
        lines.append(axis)
        return lines

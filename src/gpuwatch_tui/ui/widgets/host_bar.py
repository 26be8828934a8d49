"""One line (two when needed) saying how every host is: state, sample age, GPU source.

Lines are packed here, a whole host at a time, so a host's symbol, name and state always stay
together. With more hosts than fit in two lines, healthy hosts collapse into a count and the
ones in trouble are named. The widget repaints only when what it shows changed.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from ...store import HostRecord, Store
from .. import formatting, levels
from ..palette import Palette, Themed
from .gpu_grid import STATE_LABELS, state_label

SEPARATOR = "  "
MAX_LINES = 2  # matches max-height in the stylesheet
SYMBOLS = {"host-ok": "●", "host-warn": "○", "host-bad": "✗"}


def pack(parts: list[Text], width: int, max_lines: int, first: Text | None = None) -> list[Text] | None:
    """Greedy packing of whole parts into lines of `width` cells; None if more lines are needed.
    A part wider than a line gets a line of its own, cut with an ellipsis."""
    lines: list[Text] = [first.copy() if first is not None else Text()]
    for part in parts:
        line = lines[-1]
        needed = part.cell_len + (len(SEPARATOR) if line.cell_len else 0)
        if line.cell_len and line.cell_len + needed > width:
            if len(lines) == max_lines:
                return None
            line = Text()
            lines.append(line)
        if line.cell_len:
            line.append(SEPARATOR)
        if part.cell_len > width - line.cell_len:
            part = part.copy()
            part.truncate(max(1, width - line.cell_len), overflow="ellipsis")
        line.append_text(part)
    return lines


class HostBar(Themed, Widget):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store: Store | None = None
        self._now = 0.0
        self.paused = False
        self._parts: dict[str, tuple[tuple, Text]] = {}  # host -> (signature, text)
        self._shown: tuple = ()  # what the last repaint showed
        self._text: Text | None = None

    def _signature(self, host: HostRecord) -> tuple:
        age = host.sample_age(self._now)
        return (host.state, host.reconnects, host.gpu_source,
                None if age is None else formatting.coarse_age(age))

    def show(self, store: Store, now: float, paused: bool) -> None:
        self._store, self._now, self.paused = store, now, paused
        shown = (paused, id(self._palette), tuple(self._signature(h) for h in store.hosts.values()))
        if shown != self._shown:
            self._shown = shown
            self._text = None
            self.refresh()

    def set_paused(self, paused: bool) -> None:
        """Only the PAUSED mark changes: the cheapest repaint there is."""
        if paused != self.paused:
            self.paused = paused
            self._shown = ()
            self._text = None
            self.refresh()

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self._parts.clear()
        self._shown = ()
        self._text = None
        self.refresh()

    def on_resize(self) -> None:
        self._text = None

    def _host_text(self, host: HostRecord) -> Text:
        signature = self._signature(host)
        cached = self._parts.get(host.name)
        if cached is not None and cached[0] == signature:
            return cached[1]
        p = self.palette
        level = levels.host_level(host.state)
        text = Text()
        text.append(SYMBOLS[level], p.style(level))
        text.append(f" {host.name} ")
        text.append(state_label(host), p.style(level))
        details = [d for d in (signature[3], host.gpu_source) if d]
        if details:
            text.append(" " + " ".join(details), p.style("muted"))
        self._parts[host.name] = (signature, text)
        return text

    def render(self) -> Text:
        if self._text is None:
            self._text = self._build()
        return self._text

    def _build(self) -> Text:
        width = max(20, self.content_size.width)
        mark = None
        if self.paused:
            mark = Text(" PAUSED ", self.palette.style("host-warn", bold=True) + Style(reverse=True))
        if self._store is None:
            return mark or Text()
        hosts = list(self._store.hosts.values())
        lines = pack([self._host_text(h) for h in hosts], width, MAX_LINES, mark)
        if lines is None:
            # Too many hosts: count them by state, name the ones not connected.
            counts: dict[str, int] = {}
            for host in hosts:
                counts[host.state] = counts.get(host.state, 0) + 1
            summary = ", ".join(f"{n} {STATE_LABELS.get(state, state)}" for state, n in counts.items())
            head = Text(f"{len(hosts)} hosts: {summary}", self.palette.style("muted"))
            troubled = [h for h in hosts if h.state != "connected"]
            parts = [head] + [self._host_text(h) for h in troubled]
            lines = pack(parts, width, MAX_LINES, mark)
            while lines is None and len(parts) > 1:  # name as many as fit, count the rest
                parts.pop()
                more = Text(f"+{len(troubled) - (len(parts) - 1)} more", self.palette.style("muted"))
                lines = pack(parts + [more], width, MAX_LINES, mark)
            lines = lines or [head]
        text = Text("\n").join(lines)
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text

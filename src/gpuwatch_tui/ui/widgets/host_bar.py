"""One line (two when needed) saying how every host is: state, sample age, GPU source.

With more hosts than fit, healthy hosts collapse into a count and the ones in trouble are named.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from ...store import HostRecord, Store
from .. import formatting, levels
from ..palette import Palette
from .gpu_grid import state_label

SEPARATOR = "  "
MAX_LINES = 2  # matches max-height in the stylesheet


class HostBar(Widget):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store: Store | None = None
        self._now = 0.0
        self.paused = False
        self._palette: Palette | None = None

    def show(self, store: Store, now: float, paused: bool) -> None:
        self._store, self._now, self.paused = store, now, paused
        self.refresh()

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self.refresh()

    @property
    def palette(self) -> Palette:
        if self._palette is None:
            self._palette = Palette(self.app.theme_variables)
        return self._palette

    def _host_text(self, host: HostRecord) -> Text:
        p = self.palette
        level = levels.host_level(host.state)
        text = Text()
        text.append("●" if level == "host-ok" else "○" if level == "host-warn" else "✗", p.style(level))
        # Non-breaking spaces keep one host's facts together when the bar wraps.
        text.append(f"\u00a0{host.name}\u00a0")
        text.append(state_label(host).replace(" ", "\u00a0"), p.style(level))
        details = []
        age = host.sample_age(self._now)
        if age is not None:
            details.append(formatting.coarse_age(age))
        if host.gpu_source:
            details.append(host.gpu_source)
        if details:
            text.append("\u00a0" + "\u00a0".join(details), p.style("muted"))
        return text

    def render(self) -> Text:
        text = Text(no_wrap=False, overflow="ellipsis")
        if self.paused:
            text.append(" PAUSED ", self.palette.style("host-warn", bold=True) + Style(reverse=True))
            text.append(SEPARATOR)
        if self._store is None:
            return text
        hosts = list(self._store.hosts.values())
        width = max(20, self.content_size.width)
        parts = [self._host_text(h) for h in hosts]
        full = sum(len(t) + len(SEPARATOR) for t in parts)
        if full <= width * MAX_LINES:
            for part in parts:
                text.append_text(part)
                text.append(SEPARATOR)
            text.rstrip()
            return text
        # Too many hosts: count the healthy, name the rest.
        counts: dict[str, int] = {}
        for host in hosts:
            counts[host.state] = counts.get(host.state, 0) + 1
        summary = ", ".join(f"{n} {state}" for state, n in counts.items())
        text.append(f"{len(hosts)} hosts: {summary}", self.palette.style("muted"))
        for host, part in zip(hosts, parts):
            if host.state != "connected":
                text.append(SEPARATOR)
                text.append_text(part)
        return text

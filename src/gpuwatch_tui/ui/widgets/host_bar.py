"""One line that sums the fleet up: hosts counted by state, GPUs in total and busy, total power.

The per-host detail (name, state, GPU model, driver, CPU, RAM) is on the host headers of the GPU
grid; saying it twice wasted a line on small fleets and could not fit at all on large ones.
The widget repaints only when what it shows changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from .. import levels
from ..palette import Palette, Themed
from ..safe_rich import safe_rich
from .gpu_grid import STATE_LABELS

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...store import Store

SYMBOLS = {"host-ok": "●", "host-warn": "○", "host-bad": "✗"}
BUSY_UTIL_PCT = 5.0  # a GPU above this utilisation counts as busy


def fleet_summary(store: Store) -> tuple[dict[str, int], int, int, float]:
    """(hosts per state in first-seen order, GPUs, busy GPUs, watts drawn) of the fleet."""
    states: dict[str, int] = {}
    gpus = busy = 0
    watts = 0.0
    for host in store.hosts.values():
        states[host.state] = states.get(host.state, 0) + 1
        for record in host.gpus.values():
            gpus += 1
            sample = record.latest
            busy += (sample.util_pct or 0.0) > BUSY_UTIL_PCT
            watts += sample.power_w or 0.0
    return states, gpus, busy, watts


class HostBar(Themed, Widget):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store: Store | None = None
        self.paused = False
        self._shown: tuple = ()  # what the last repaint showed
        self._text: Text | None = None
        self.filter_text = ""
        self.filtering = False
        self.problems_only = False
        self.time_cursor = ""  # a replay's "now" (its source's time_cursor()); empty when live
        self.recording_problem: str | None = None  # the rolling recording stopped (its source says why)

    def set_problems_only(self, on: bool) -> None:
        if on != self.problems_only:
            self.problems_only = on
            self._shown = ()
            self._text = None
            self.refresh()

    def set_filter(self, text: str, editing: bool) -> None:
        """The `/` filter is typed here, on the summary line: no widget appears, nothing relayouts."""
        if (text, editing) != (self.filter_text, self.filtering):
            self.filter_text, self.filtering = text, editing
            self._shown = ()
            self._text = None
            self.refresh()

    def show(self, store: Store, now: float, paused: bool) -> None:
        self._store, self.paused = store, paused
        cursor = getattr(getattr(self.app, "source", None), "time_cursor", None)
        self.time_cursor = cursor() if cursor is not None else ""
        self.recording_problem = getattr(getattr(self.app, "source", None), "recording_problem", None)
        states, gpus, busy, watts = fleet_summary(store)
        shown = (self.time_cursor, self.recording_problem, paused, id(self._palette), tuple(states.items()), gpus, busy, round(watts / 100))
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
        self._shown = ()
        self._text = None
        self.refresh()

    def render(self) -> Text:
        if self._text is None:
            self._text = safe_rich(self._build())
        return self._text

    def _build(self) -> Text:
        p = self.palette
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.time_cursor:
            text.append(f" {self.time_cursor} ", p.style("host-warn", bold=True) + Style(reverse=True))
            text.append("  ")
        if self.paused:
            text.append(" PAUSED ", p.style("host-warn", bold=True) + Style(reverse=True))
            text.append("  ")
        if self.recording_problem:  # the whole reason is in the alert; here, that it is not recording
            text.append(" NOT RECORDING ", p.style("host-bad", bold=True) + Style(reverse=True))
            text.append("  ")
        if self.problems_only:
            text.append(" PROBLEMS ONLY ", p.style("host-bad", bold=True) + Style(reverse=True))
            text.append(" ctrl+z: all  ", p.style("muted"))
        if self.filtering or self.filter_text:
            text.append(" / ", p.style("host-warn", bold=True) + Style(reverse=True))
            text.append(f" {self.filter_text}", Style(bold=True))
            if self.filtering:
                text.append("▏ filter hosts and jobs (enter: keep, esc: clear)", p.style("muted"))
            text.append("  │  ", p.style("muted"))
        if self._store is None:
            return text
        states, gpus, busy, watts = fleet_summary(self._store)
        muted = p.style("muted")
        total = sum(states.values())
        text.append(f"{total} host{'s' if total != 1 else ''}", Style(bold=True))
        for n, (state, count) in enumerate(states.items()):
            level = levels.host_level(state)
            text.append(": " if n == 0 else ", ", muted)
            text.append(f"{SYMBOLS[level]} {count} {STATE_LABELS.get(state, state)}", p.style(level))
        text.append("  │  ", muted)
        text.append(f"{gpus} GPU{'s' if gpus != 1 else ''}", Style(bold=True))
        text.append(f", {busy} busy", p.style(levels.util_level(100.0 * busy / gpus if gpus else None)))
        text.append("  │  ", muted)
        text.append(f"{watts / 1000:.1f} kW", Style(bold=True))
        return text

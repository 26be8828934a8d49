"""The phases a job went through, oldest first, with how long each lasted."""

from __future__ import annotations

from rich.text import Text

from ...views import PhaseEntry
from .. import formatting, levels
from .themed_static import ThemedStatic


class PhaseHistory(ThemedStatic):
    def build(self, history: tuple[PhaseEntry, ...], now: float) -> Text:
        p = self.palette
        text = Text()
        text.append("history ", p.style("muted"))
        entries = list(history)
        for n, entry in enumerate(entries):
            end = entries[n + 1].since if n + 1 < len(entries) else now
            if n:
                text.append(" → ", p.style("muted"))
            phase = entry.phase or "unknown"
            text.append(phase, p.style(levels.phase_variable(phase)))
            text.append(f" {formatting.age(end - entry.since)}", p.style("muted"))
        if not entries:
            text.append("-", p.style("muted"))
        return text

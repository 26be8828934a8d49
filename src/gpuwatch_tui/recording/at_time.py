"""`--at TIME` for recordings: when in the recording a person means."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from .format import RecordingError

_OFFSET = re.compile(r"^([+-])(\d+(?:\.\d+)?)([smh]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
AT_HELP = ("+90s / +5m / +1h (after the start), -2m (before the end), 'end', an ISO time "
           "(2026-11-30T04:37:44Z; no zone: UTC), HH:MM[:SS] (UTC, on the recording's first day) or unix seconds")


def parse_at(text: str, start: float, end: float) -> float:
    """The instant `text` names, clamped to [start, end]; RecordingError with the accepted forms."""
    text = text.strip()
    t = _parse(text, start, end)
    if t is None:
        raise RecordingError(f"--at {text!r}: expected {AT_HELP}")
    return min(max(t, start), end)


def _parse(text: str, start: float, end: float) -> float | None:
    if text in ("end", "last"):
        return end
    if text in ("start", "first"):
        return start
    m = _OFFSET.match(text)
    if m:
        amount = float(m.group(2)) * _UNITS[m.group(3)]
        return start + amount if m.group(1) == "+" else end - amount
    try:
        return float(text)
    except ValueError:
        pass
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", text):
        day = datetime.fromtimestamp(start, timezone.utc)
        parts = [int(x) for x in text.split(":")] + [0]
        if not (parts[0] < 24 and parts[1] < 60 and parts[2] < 60):
            return None
        return day.replace(hour=parts[0], minute=parts[1], second=parts[2], microsecond=0).timestamp()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()

"""The lines under a host's header in the GPU grid: what the header cannot hold, wrapped, never cut.

A host's error (an unknown key's fingerprint, why a connect failed), its GPU error (`nvidia-smi exited 9:
...`) and its hint (the command that trusts a key) are what a person acts on; cut at the terminal's edge
they are useless. An error stays on the header while the whole header fits; otherwise it moves to note
lines under it. The header's figures (CPU, load, age) change width every second, so an error that moved
comes back only once it fits with room to spare, and the grid does not jump between the two layouts.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...safe_text import safe_text
from .. import levels

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ...store import HostRecord

NOTE_INDENT = "   "
BACK_ON_HEADER_SLACK = 8  # cells to spare before a moved error returns to the header
MIN_NOTE_WIDTH = 20  # narrower than this, lines are cut rather than wrapped into a column of letters


@dataclass(frozen=True)
class Note:
    text: str  # one line, sanitised
    level: str  # theme variable


def error_parts(host: HostRecord) -> list[tuple[str, str]]:
    """(text, theme variable) of each error the host reports, in the order the header shows them."""
    parts = []
    if host.error:
        parts.append((host.error, levels.host_level(host.state)))
    if host.gpu_error:
        parts.append((f"GPU: {host.gpu_error}", "host-warn"))
    return parts


def wrap_note(text: str, width: int) -> list[str]:
    """`text` (host-controlled: sanitised first, so widths are the drawn ones) in lines that fit `width`
    after the indent; words are kept whole where they fit (a fingerprint or a command stays one piece)."""
    text = safe_text(text)
    room = width - len(NOTE_INDENT)
    if room < MIN_NOTE_WIDTH:
        return [text]
    return textwrap.wrap(text, room, break_long_words=True, break_on_hyphens=False) or [""]


def host_notes(host: HostRecord, width: int, errors_below: bool) -> tuple[Note, ...]:
    """The note lines under `host`'s header: its errors when they are not on the header, then its hint."""
    notes: list[Note] = []
    if errors_below:
        for text, level in error_parts(host):
            notes.extend(Note(line, level) for line in wrap_note(text, width))
    if host.hint:
        notes.extend(Note(line, "muted") for line in wrap_note(host.hint, width))
    return tuple(notes)


def errors_stay_below(header_cells: int, width: int, were_below: bool) -> bool:
    """Whether a host's errors go under its header, given the header's length with them on it."""
    if were_below:
        return header_cells + BACK_ON_HEADER_SLACK > width
    return header_cells > width

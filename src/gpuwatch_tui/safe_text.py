"""Host-controlled text made safe for a terminal or a chat message: the one sanitiser.

Process names, argv, cwd, GPU names, Slurm fields, probe stderr and log lines are written by whoever
runs on a host. Shown raw they can retitle the terminal (OSC 2), write the clipboard (OSC 52), plant
links (OSC 8), talk to the terminal (DCS, C1 controls) or make a line read differently than it is (bidi
overrides). `safe_text` keeps every such character visible instead of acting on it:

- ESC and the other C0 controls as their control picture (`␛`, `␇`, `␊`), DEL as `␡`;
- C1 controls and bytes that were not UTF-8 (decoded with surrogateescape) as `\\x9b`;
- format characters (bidi overrides and isolates, zero-width space/joiners, BOM), line and paragraph
  separators and other unprintable code points as `<U+202E>`;
- runs of combining marks cut to MAX_MARKS per base character (the rest counted: `<+N marks>`), so
  "zalgo" text cannot smear over the rows around it.

Printable ASCII (nearly every name and command) comes back unchanged and fast. `slack_escape` adds the
escaping Slack-style webhooks need so `<!channel>` or `<http://x|fix>` in a job name is text, not a ping.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

_category = unicodedata.category
MAX_MARKS = 4  # combining marks kept on one base character (scripts that stack marks use up to ~3)
_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)}  # ␀ .. ␟ (ESC is ␛)
_PICTURES[0x7F] = "\u2421"  # ␡
_SPACE_SEPARATORS = frozenset("\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                              "\u200a\u202f\u205f\u3000")


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return _PICTURES[code]
    if 0x80 <= code <= 0x9F:
        return f"\\x{code:02x}"  # C1: the 8-bit CSI/OSC/DCS/ST a terminal would obey
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"  # a byte that was not UTF-8 (surrogateescape)
    if char in _SPACE_SEPARATORS:
        return " "
    return f"<U+{code:04X}>"


def safe_text(value: Any, limit: int | None = None, keep: str = "") -> str:
    """`value` as text that does nothing to a terminal but show itself; at most `limit` characters
    (then `…`). Characters in `keep` (e.g. "\\n" for a multi-line block) pass unchanged."""
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", "surrogateescape")
    else:
        text = value if isinstance(value, str) else str(value)
    if not (text.isascii() and text.isprintable()):
        text = _slow_path(text, keep)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


@functools.lru_cache(maxsize=4096)
def _slow_path(text: str, keep: str) -> str:
    # One category lookup per character: printable == category L, M, N, P, S, or a plain space. Cached:
    # the dashboard draws the same non-ASCII cells (sparklines, bars, names) over and over.
    out: list[str] = []
    marks = 0
    dropped = 0
    for char in text:
        cat = _category(char)
        if cat == "Mn" or cat == "Me":
            marks += 1
            if marks <= MAX_MARKS:
                out.append(char)
            else:
                dropped += 1
            continue
        if dropped:
            out.append(f"<+{dropped} marks>")
        marks = dropped = 0
        if cat[0] in "LMNPS" or char == " " or char in keep:
            out.append(char)
        else:
            out.append(_escape(char))
    if dropped:
        out.append(f"<+{dropped} marks>")
    return "".join(out)


def safe_lines(text: Any, limit: int | None = None) -> str:
    """A multi-line block (a plan, a table): each line made safe, the newlines kept."""
    return safe_text(text, limit, keep="\n")


def safe_words(words, limit: int | None = None) -> list[str]:
    return [safe_text(w, limit) for w in words]


def slack_escape(text: str) -> str:
    """Text for a Slack-style `text` field: safe, and with the three characters Slack parses escaped."""
    return safe_text(text, keep="\n").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

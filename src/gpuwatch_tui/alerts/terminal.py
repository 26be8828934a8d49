"""Desktop notifications through the terminal: the escape sequence each terminal understands.

OSC 777 (urxvt, foot, VTE, Ghostty, WezTerm), OSC 9 (iTerm2, Windows Terminal, WezTerm, Ghostty),
OSC 99 (kitty); anything else gets the bell. Inside tmux the sequence is wrapped in a DCS
passthrough (tmux must have `allow-passthrough on`). The text comes from job names and logs: every
control byte is removed, and the separators a sequence uses are replaced, so text cannot end the
sequence early or start another.
"""

from __future__ import annotations

import os
from typing import Mapping

from ..safe_text import safe_text

BEL = b"\x07"
ST = b"\x1b\\"
MAX_TEXT = 240


def plain_text(text: str, limit: int = MAX_TEXT) -> str:
    """One line with no control, C1 or bidi character (the sanitiser shows them), whitespace collapsed."""
    text = safe_text(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def detect_terminal(env: Mapping[str, str] | None = None) -> str:
    """osc777 / osc9 / osc99 / bell, from what the environment says the terminal is."""
    env = os.environ if env is None else env
    term = env.get("TERM", "")
    program = env.get("TERM_PROGRAM", "")
    if env.get("KITTY_WINDOW_ID") or term == "xterm-kitty":
        return "osc99"
    if program in ("iTerm.app", "WezTerm", "ghostty") or env.get("WT_SESSION"):
        return "osc9"
    if term.startswith(("rxvt", "foot")) or env.get("VTE_VERSION"):
        return "osc777"
    return "bell"


def notification_bytes(title: str, body: str, terminal: str) -> bytes:
    title, body = plain_text(title), plain_text(body)
    if terminal == "osc777":
        # OSC 777 ; notify ; TITLE ; BODY: a ';' in the title would move words into the body.
        return b"\x1b]777;notify;" + title.replace(";", ",").encode() + b";" + body.encode() + ST
    if terminal == "osc9":
        # iTerm2 reads "9;4;..." as a progress report: never let the text start with a digit and ';'.
        text = f"{title}: {body}"
        return b"\x1b]9;" + text.encode() + ST
    if terminal == "osc99":
        # kitty: title and body as two chunks of one notification (d=0: more follows).
        return (b"\x1b]99;i=gpuwatch:d=0:p=title;" + title.encode() + ST
                + b"\x1b]99;i=gpuwatch:d=1:p=body;" + body.encode() + ST)
    return BEL


def tmux_wrap(sequence: bytes) -> bytes:
    """DCS tmux; passthrough: every ESC inside is doubled. A bare bell needs no wrapping."""
    if sequence == BEL:
        return sequence
    return b"\x1bPtmux;" + sequence.replace(b"\x1b", b"\x1b\x1b") + ST


def desktop_notification(title: str, body: str, terminal: str = "auto",
                         env: Mapping[str, str] | None = None) -> bytes:
    """The bytes to write to the terminal for one notification (the bell when nothing fits)."""
    env = os.environ if env is None else env
    kind = detect_terminal(env) if terminal == "auto" else terminal
    sequence = notification_bytes(title, body, kind)
    return tmux_wrap(sequence) if env.get("TMUX") else sequence

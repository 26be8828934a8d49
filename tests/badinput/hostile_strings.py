"""Hostile text for the terminal-injection tests: fixed payloads, a hypothesis strategy, and the check.

A terminal obeys ESC, the other C0 controls, DEL, the C1 range (8-bit CSI/OSC/DCS/ST) and shows bidi
overrides/isolates and zero-width characters as something else than they are. None of them may reach a
terminal or a chat message from a host; a long run of combining marks must be cut.
"""

from __future__ import annotations

import re
import unicodedata

from hypothesis import strategies as st

# Any C0 control but tab and newline (the output's own layout), DEL, C1, bidi and zero-width format chars.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2028\u2029\u061c\ufeff]")
RAW_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8b-\x8f\xaa-\xae\xa8\xa9]"
                               rb"|\xe2\x81[\xa6-\xa9]|\xd8\x9c|\xef\xbb\xbf")

OSC2 = "\x1b]2;PWNED\x07"
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
DCS = "\x1bP+q544e\x1b\\"
C1 = "\x9b2J\x9d0;c1\x9c"
RLO = "\u202eevil\u202c"
ZALGO = "z" + "\u0301" * 300
PAYLOADS = [OSC2, OSC52, OSC8, DCS, C1, RLO, ZALGO, "\x00nul\x7fdel\x08bs", "zw\u200b\u200d\ufeffj"]

hostile_chars = st.one_of(
    st.sampled_from(list("\x1b\x07\x9b\x9d\x9c\x90\x85\x00\x7f\r\n\t\u202e\u202d\u2066\u2069\u200b\u200d\ufeff\u2028")),
    st.characters(categories=("Cc", "Cf", "Mn", "Me", "Zl", "Zp")),
    st.characters(codec="utf-8"),
    st.sampled_from(["\u0301", "\u0336", "\u20dd"]),
)
hostile_text = st.one_of(
    st.text(hostile_chars, max_size=60),
    st.lists(st.sampled_from(PAYLOADS + ["ok", " ", "<!channel>", "&", "<http://x|fix>"]), max_size=5).map("".join),
)


def longest_mark_run(text: str) -> int:
    run = best = 0
    for ch in text:
        run = run + 1 if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me") else 0
        best = max(best, run)
    return best


def assert_clean(text: str, max_marks: int = 4) -> None:
    bad = RAW_CONTROL.search(text)
    assert bad is None, f"raw control {bad.group()!r} in {text[:200]!r}"
    assert longest_mark_run(text) <= max_marks, f"a run of {longest_mark_run(text)} combining marks"


def raw_bytes_found(data: bytes) -> list[bytes]:
    return RAW_CONTROL_BYTES.findall(data)

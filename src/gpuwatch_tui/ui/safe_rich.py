"""Rich Text with its characters passed through the one sanitiser, its styles kept.

Widgets build Text from host data (job names, command lines, GPU models, host errors, py-spy frames);
what a widget hands to Textual goes through `safe_rich` first, so a field added later is covered.
"""

from __future__ import annotations

from rich.text import Text

from ..safe_text import safe_text


def _is_plain(text: str) -> bool:
    return text.isascii() and text.replace("\n", "").isprintable()


def safe_rich(content):
    """`content` (a Text or a str) with host-controlled characters shown, not obeyed; newlines kept.
    A str comes back as Text: a widget would read `[link=...]` in a str as markup, and markup is not data."""
    if isinstance(content, str):
        return Text(content if _is_plain(content) else safe_text(content, keep="\n\t"))
    if not isinstance(content, Text) or _is_plain(content.plain):
        return content
    plain, spans = content.plain, content.spans
    cuts = sorted({0, len(plain), *(s.start for s in spans), *(s.end for s in spans)})
    out = Text(style=content.style, justify=content.justify, overflow=content.overflow,
               no_wrap=content.no_wrap, end=content.end, tab_size=content.tab_size)
    for start, end in zip(cuts, cuts[1:]):
        if start >= end:
            continue
        at = len(out)
        out.append(safe_text(plain[start:end], keep="\n\t"))
        for span in spans:
            if span.start <= start and span.end >= end:
                out.stylize(span.style, at, len(out))
    return out

"""Sparklines as block characters in Rich Text: one character per sample, coloured by level."""

from __future__ import annotations

from typing import Callable, Iterable

from rich.style import Style
from rich.text import Text

BLOCKS = " ▁▂▃▄▅▆▇█"
NO_DATA = "·"


def sparkline(
    values: Iterable[float | None],
    width: int,
    style_for: Callable[[float], Style],
    empty_style: Style | None = None,
    top: float = 100.0,
) -> Text:
    """The newest `width` samples, right-aligned. Missing history and samples that were not
    measured (None) are drawn as dim dots: a gap, not a zero."""
    samples = list(values)[-width:] if width > 0 else []
    text = Text()
    if len(samples) < width:
        text.append(NO_DATA * (width - len(samples)), empty_style)
    steps = len(BLOCKS) - 1
    run: list[str] = []
    run_style: Style | None = None
    for value in samples:
        if value is None:
            style, char = empty_style, NO_DATA
        else:
            fraction = 0.0 if top <= 0 else max(0.0, min(1.0, value / top))
            # Zero still draws the lowest block (in its level's colour): "measured 0" differs from "no data".
            style, char = style_for(value), BLOCKS[max(1, round(fraction * steps))]
        if style is not run_style and run:
            text.append("".join(run), run_style)  # one span per run of one colour: cheap to render
            run = []
        run_style = style
        run.append(char)
    if run:
        text.append("".join(run), run_style)
    return text

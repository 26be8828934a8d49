"""Sparklines as block characters in Rich Text: one character per sample, coloured by level."""

from __future__ import annotations

from typing import Callable, Iterable

from rich.style import Style
from rich.text import Text

BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(
    values: Iterable[float],
    width: int,
    style_for: Callable[[float], Style],
    empty_style: Style | None = None,
    top: float = 100.0,
) -> Text:
    """The newest `width` samples, right-aligned; missing history is drawn as dim dots."""
    samples = list(values)[-width:] if width > 0 else []
    text = Text()
    if len(samples) < width:
        text.append("·" * (width - len(samples)), empty_style)
    steps = len(BLOCKS) - 1
    run: list[str] = []
    run_style: Style | None = None
    for value in samples:
        fraction = 0.0 if top <= 0 else max(0.0, min(1.0, value / top))
        # Zero still draws the lowest block (in its level's colour): "measured 0" differs from "no data".
        level = max(1, round(fraction * steps))
        style = style_for(value)
        if style is not run_style and run:
            text.append("".join(run), run_style)  # one span per run of one colour: cheap to render
            run = []
        run_style = style
        run.append(BLOCKS[level])
    if run:
        text.append("".join(run), run_style)
    return text

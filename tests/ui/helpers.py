"""Reading what a widget shows, for assertions."""

from __future__ import annotations

from rich.text import Text


def static_text(widget) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def lines_of(widget) -> list[str]:
    """The visible lines of a Line API widget, as plain text."""
    return [widget.render_line(y).text for y in range(widget.scrollable_content_region.height)]


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]

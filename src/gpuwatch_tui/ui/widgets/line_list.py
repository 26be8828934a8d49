"""What the Line API lists (GPU grid, jobs table) share: a row cursor moved by keys, the base
style taken once per repaint, and a Text rendered onto a strip of the widget's width."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...safe_text import safe_text
from ..palette import Themed

# j/k as in less, vim, htop and k9s; the kill key is capital K (as in nvitop), so a slip on k only moves.
CURSOR_BINDINGS = [
    Binding("up,k", "cursor_up", "Up", show=False),
    Binding("down,j", "cursor_down", "Down", show=False),
    Binding("pageup", "page_up", "Page up", show=False),
    Binding("pagedown", "page_down", "Page down", show=False),
    Binding("home", "cursor_home", "First", show=False),
    Binding("end", "cursor_end", "Last", show=False),
]


class LineList(Themed, ScrollView):
    """A subclass keeps `cursor`, says how many rows it has (`row_count`) and how to move the
    cursor (`_move_cursor`); HEADER_LINES are lines on top that do not scroll with the rows."""

    HEADER_LINES = 0
    cursor = 0
    _base_style: Style | None = None

    @property
    def row_count(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _move_cursor(self, row: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- drawing ---------------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        self._base_style = self.rich_style  # once per repaint, not once per line
        return super().render_lines(crop)

    @property
    def base_style(self) -> Style:
        return self._base_style if self._base_style is not None else self.rich_style

    def _render_text(self, text: Text, width: int, style: Style) -> Strip:
        """`text` on `style`, padded or cropped to `width` cells."""
        combined: dict = {}  # a handful of distinct styles per line: combine each once

        def on_base(seg_style):
            if seg_style is None:
                return style
            result = combined.get(seg_style)
            if result is None:
                result = combined[seg_style] = style + seg_style
            return result

        # Every cell these lists draw passes the sanitiser: host text (names, commands, GPU models,
        # host errors) is shown, never obeyed, whichever field it came in.
        segments = [Segment(safe_text(seg.text), on_base(seg.style)) for seg in text.render(self.app.console)]
        return Strip(segments).extend_cell_length(width, style).crop(0, width)

    # -- cursor ----------------------------------------------------------------------------

    @property
    def _page(self) -> int:
        return max(1, self.size.height - self.HEADER_LINES - 1)

    def action_cursor_up(self) -> None:
        self._move_cursor(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self._move_cursor(self.cursor + 1)

    def action_page_up(self) -> None:
        self._move_cursor(self.cursor - self._page)

    def action_page_down(self) -> None:
        self._move_cursor(self.cursor + self._page)

    def action_cursor_home(self) -> None:
        self._move_cursor(0)

    def action_cursor_end(self) -> None:
        self._move_cursor(self.row_count - 1)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

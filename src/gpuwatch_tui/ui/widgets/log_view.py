"""A log tail that follows new lines, pauses when scrolled up, and can be searched.

Line API: only visible lines are drawn. While paused the lines on screen are frozen (the source's
buffer may rotate under a fast writer); only the count of lines arrived since is kept.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...safe_text import safe_text
from ..palette import Palette, Themed


class LogView(Themed, ScrollView, can_focus=True):
    BINDINGS = [
        Binding("n", "next_match", "Next match", show=False),
        Binding("N", "previous_match", "Previous match", show=False),
        Binding("f", "follow", "Follow", show=True),
        Binding("w", "toggle_wrap", "Wrap", show=True),
    ]
    CUT = "›"  # drawn in the last column of a line that goes on past the right edge

    follow: reactive[bool] = reactive(True)
    new_lines: reactive[int] = reactive(0)

    class FollowChanged(Message):
        def __init__(self, follow: bool, new_lines: int) -> None:
            super().__init__()
            self.follow = follow
            self.new_lines = new_lines

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self._total_shown = 0  # the source's line total when `lines` was taken
        self._longest = 0
        self.search_term = ""
        self.matches: list[int] = []
        self.match_index = -1
        self.wrap = False
        self._rows: list[tuple[int, int]] = []  # wrapped: (line index, start column) per screen row
        self._rows_width = 0

    def action_toggle_wrap(self) -> None:
        """Long lines either wrap onto following rows or scroll sideways (with a cut marker)."""
        self.wrap = not self.wrap
        self._rows_width = 0
        self._sync_size()
        if self.follow:
            self.scroll_end(animate=False, x_axis=False)
        self.refresh()
        self.notify("long lines wrap" if self.wrap else "long lines scroll sideways (›: cut)", timeout=1.5)

    def _wrapped_rows(self) -> list[tuple[int, int]]:
        width = max(1, self.scrollable_content_region.width)
        if self._rows_width != width or self._rows_index is not self.lines:
            rows = []
            for index, line in enumerate(self.lines):
                rows.extend((index, start) for start in range(0, max(1, len(line)), width))
            self._rows = rows
            self._rows_index = self.lines
            self._rows_width = width
        return self._rows

    _rows_index: list[str] = []

    def _sync_size(self) -> None:
        if self.wrap:
            self._rows_width = 0
            self.virtual_size = Size(self.scrollable_content_region.width, len(self._wrapped_rows()))
        else:
            self.virtual_size = Size(self._longest, len(self.lines))

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self.refresh()

    # -- data in ---------------------------------------------------------------------------

    _SAFE_CACHE_MAX = 8192
    _safe_cache: dict[str, str] = {}

    @classmethod
    def _safe(cls, line: str) -> str:
        """The live core's lines are sanitised already; a recording's may not be (a file can be made by
        anyone): each line passes the sanitiser once, remembered, so a refresh of a long log costs lookups."""
        if line.isascii() and line.isprintable():
            return line
        shown = cls._safe_cache.get(line)
        if shown is None:
            if len(cls._safe_cache) >= cls._SAFE_CACHE_MAX:
                cls._safe_cache.clear()
            shown = cls._safe_cache[line] = safe_text(line)
        return shown

    @property
    def wants_lines(self) -> bool:
        """Whether the next update should re-read the lines (only when following)."""
        return self.follow

    def reset(self) -> None:
        """Back to the state of a new view (no lines, following, no search, no wrap): the job pane
        is reused for the next job, and nothing of the last job's log may stay."""
        self.lines = []
        self._total_shown = 0
        self._longest = 0
        self.search_term = ""
        self.matches = []
        self.match_index = -1
        self.wrap = False
        self._rows = []
        self._rows_width = 0
        self.follow = True  # before the count: no "paused · +0 new lines" mark on the way
        self.new_lines = 0
        self._sync_size()
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def set_lines(self, lines: list[str], total: int) -> None:
        """New lines while following; replaces the view and sticks to the bottom."""
        if not all(line.isascii() and line.isprintable() for line in lines):
            lines = [self._safe(line) for line in lines]
        self.lines = lines
        self._total_shown = total
        self._longest = max((len(line) for line in lines), default=0)
        self.new_lines = 0
        if self.search_term:
            self._find_matches()
        self._sync_size()
        # Deferred: after the next layout the new virtual size is known.
        self.scroll_end(animate=False, x_axis=False)
        self.refresh()

    def set_total(self, total: int) -> None:
        """While paused only the count of new lines changes."""
        self.new_lines = max(0, total - self._total_shown)

    # -- follow ----------------------------------------------------------------------------

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        at_bottom = new >= self.max_scroll_y
        if new < old and not at_bottom:
            self.follow = False
        elif at_bottom and not self.follow and not self.search_term:
            self.follow = True

    def watch_follow(self, follow: bool) -> None:
        self.post_message(self.FollowChanged(follow, self.new_lines))

    def watch_new_lines(self, count: int) -> None:
        self.post_message(self.FollowChanged(self.follow, count))

    def action_follow(self) -> None:
        self.clear_search()
        self.follow = True
        self.scroll_end(animate=False, x_axis=False)

    def on_resize(self) -> None:
        if self.wrap:
            self._sync_size()
        if self.follow:  # the pane's layout settles after the first lines arrive
            self.scroll_end(animate=False, x_axis=False)

    def pause(self) -> None:
        self.follow = False

    # -- search ----------------------------------------------------------------------------

    def search(self, term: str) -> int:
        """Highlight `term`, pause following and jump to the newest match. Returns the match count."""
        self.search_term = term
        self.follow = False
        self._find_matches()
        self.match_index = len(self.matches) - 1
        self._show_match()
        self.refresh()
        return len(self.matches)

    def clear_search(self) -> None:
        self.search_term = ""
        self.matches = []
        self.match_index = -1
        self.refresh()

    def _find_matches(self) -> None:
        term = self.search_term.lower()
        self.matches = [i for i, line in enumerate(self.lines) if term in line.lower()] if term else []

    def _show_match(self) -> None:
        if 0 <= self.match_index < len(self.matches):
            line = self.matches[self.match_index]
            self.scroll_to_region(Region(0, line, 1, 1), animate=False, immediate=True, center=True)

    def action_next_match(self) -> None:
        if self.matches:
            self.match_index = (self.match_index + 1) % len(self.matches)
            self._show_match()

    def action_previous_match(self) -> None:
        if self.matches:
            self.match_index = (self.match_index - 1) % len(self.matches)
            self._show_match()

    # -- drawing ---------------------------------------------------------------------------

    _paint: tuple[Style, int] | None = None  # (base style, width) for the repaint under way

    def render_lines(self, crop: Region) -> list[Strip]:
        # The base style walks every ancestor's styles: once per repaint, not once per line (a
        # full pane of lines spent ~10 ms on it, on every open of a job pane).
        self._paint = (self.rich_style, self.scrollable_content_region.width)
        try:
            return super().render_lines(crop)
        finally:
            self._paint = None

    def render_line(self, y: int) -> Strip:
        base, width = self._paint or (self.rich_style, self.scrollable_content_region.width)
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        if self.wrap:
            rows = self._wrapped_rows()
            if index >= len(rows):
                return Strip.blank(width, base)
            index, start = rows[index]
            line = self.lines[index][start:start + width]
            scroll_x = 0
        elif index >= len(self.lines):
            return Strip.blank(width, base)
        else:
            line = self.lines[index]
        if self.search_term and self.search_term.lower() in line.lower():
            text = Text(line)
            text.highlight_words([self.search_term], self.palette.style("log-match", bold=True) + Style(reverse=True), case_sensitive=False)
            segments = [Segment(s.text, base + s.style if s.style else base) for s in text.render(self.app.console)]
            strip = Strip(segments)
        else:
            strip = Strip([Segment(line, base)])
        strip = strip.crop_extend(scroll_x, scroll_x + width, base)
        if not self.wrap and strip.cell_length and len(line) > scroll_x + width:
            marker = Strip([Segment(self.CUT, self.palette.style("log-match", bold=True) + base)])
            strip = Strip.join([strip.crop(0, width - 1), marker])
        return strip

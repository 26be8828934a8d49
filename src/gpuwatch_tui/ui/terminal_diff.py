"""Write only the cells that changed: a copy of what the terminal shows, and Textual's updates cut down to
the runs of cells that differ from it (what curses does for nvitop).

Textual repaints a refreshed widget whole, and a whole screen when a pane's height changes: a chart that
moves by one sample a second, a "since" column that ticks, sent every second as full lines of truecolor
escapes (~20 KB/s at 200x50). Most of those cells are what the terminal already shows, so every update is
compared cell by cell with the copy. A resize (the terminal may reflow or clear) forgets the copy, so the
next update is written whole.
"""

from __future__ import annotations

from functools import lru_cache

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate
from textual.strip import Strip

# Unchanged cells shorter than this between two changed runs are sent anyway: a cursor move costs ~8 bytes.
JOIN_GAP = 6
WIDE_TAIL = ("", None)  # the right half of a double-width character

Cell = tuple[str, Style | None]


def _cells(strip: Strip) -> list[Cell]:
    cells: list[Cell] = []
    for text, style, control in strip:
        if control:
            continue
        for char in text:
            width = cell_len(char)
            if width == 0:  # a combining mark rides on the cell before it
                at = len(cells) - 1
                if at >= 0 and cells[at] is WIDE_TAIL:
                    at -= 1
                if at >= 0:
                    cells[at] = (cells[at][0] + char, cells[at][1])
                continue
            cells.append((char, style))
            if width == 2:
                cells.append(WIDE_TAIL)
    return cells


@lru_cache(maxsize=4096)
def _looks(style: Style | None) -> tuple[Style | None, Style | None]:
    """How a style looks on a glyph and on a blank: Textual's mouse metadata (a cell's offset) is dropped,
    and a blank shows only its background and lines."""
    if style is None:
        return None, None
    plain = style.clear_meta_and_links()
    blank = Style(bgcolor=style.bgcolor, reverse=style.reverse, underline=style.underline, strike=style.strike,
                  overline=style.overline, underline2=style.underline2, conceal=style.conceal)
    return plain, blank


def _segment_looks(strip: Strip) -> tuple:
    return tuple((text, _looks(style)[0]) for text, style, control in strip if not control)


def _key(cell: Cell) -> Cell:
    char, style = cell
    plain, blank = _looks(style)
    return (char, blank if char == " " else plain)


class ShadowScreen:
    """What the terminal shows, row by row (None: not known)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[int, Cell]] = {}
        # row -> x -> (width, segments' looks) of the last piece written there whole and not overwritten
        # since: most pieces come back unchanged, and comparing their segments is cheaper than their cells.
        self.pieces: dict[int, dict[int, tuple[int, tuple]]] = {}

    def forget(self) -> None:
        self.rows.clear()
        self.pieces.clear()

    def unchanged(self, x: int, y: int, strip: Strip) -> bool:
        """True when the terminal already shows exactly this piece at (x, y)."""
        known = self.pieces.get(y, {}).get(x)
        return known is not None and known == (strip.cell_length, _segment_looks(strip))

    def record(self, x: int, y: int, cells: list[Cell], strip: Strip | None = None) -> None:
        pieces = self.pieces.setdefault(y, {})
        end = x + len(cells)
        for start in [s for s, (width, _) in pieces.items() if s < end and s + width > x]:
            del pieces[start]
        if strip is not None:
            pieces[x] = (strip.cell_length, _segment_looks(strip))
        row = self.rows.setdefault(y, {})
        for offset, cell in enumerate(cells):
            row[x + offset] = _key(cell)

    def changed_runs(self, x: int, y: int, cells: list[Cell]) -> list[tuple[int, int]]:
        """[(start, end)) offsets into `cells` that differ from the terminal, short gaps joined."""
        row = self.rows.get(y, {})
        runs: list[tuple[int, int]] = []
        start = None
        for offset, cell in enumerate(cells):
            if row.get(x + offset) != _key(cell):
                if start is None:
                    start = offset
                end = offset + 1
            elif start is not None and offset - end >= JOIN_GAP:
                runs.append((start, end))
                start = None
        if start is not None:
            runs.append((start, end))
        joined: list[tuple[int, int]] = []
        for run in runs:
            if joined and run[0] - joined[-1][1] < JOIN_GAP:
                joined[-1] = (joined[-1][0], run[1])
            else:
                joined.append(run)
        # Never start or end inside a double-width character.
        fixed = []
        for start, end in joined:
            if cells[start] is WIDE_TAIL and start > 0:
                start -= 1
            if end < len(cells) and cells[end] is WIDE_TAIL:
                end += 1
            fixed.append((start, end))
        return fixed


def _render_cells(cells: list[Cell], console: Console) -> str:
    segments: list[Segment] = []
    text: list[str] = []
    style: Style | None = None
    for char, cell_style in cells:
        if (char, cell_style) == WIDE_TAIL:
            continue
        if cell_style != style and text:
            segments.append(Segment("".join(text), style))
            text = []
        style = cell_style
        text.append(char)
    if text:
        segments.append(Segment("".join(text), style))
    return Strip(segments).render(console)


def _pieces(update: CompositorUpdate) -> list[tuple[int, int, Strip]]:
    """(x, y, strip) for every piece of line an update would write, cropped as Textual crops it."""
    pieces = []
    if isinstance(update, LayoutUpdate):
        for y, line in enumerate(update.strips, update.region.y):
            pieces.append((update.region.x, y, Strip.join(list(line))))
    elif isinstance(update, ChopsUpdate):
        for y, x1, x2 in update.spans:
            for end, (x, strip) in zip(update.chop_ends[y], update.chops[y].items()):
                if strip is None or x > x2 or end <= x1:
                    continue
                if not (x2 > x >= x1 and end <= x2):
                    strip = strip.crop(0, min(end, x2) - x)
                pieces.append((x, y, strip))
    return pieces


class DiffedUpdate(CompositorUpdate):
    """A compositor update that writes only the cells the terminal does not already show."""

    def __init__(self, update: CompositorUpdate, shadow: ShadowScreen) -> None:
        self.update = update
        self.shadow = shadow

    def render_segments(self, console: Console) -> str:
        out: list[str] = []
        for x, y, strip in _pieces(self.update):
            if self.shadow.unchanged(x, y, strip):
                continue
            cells = _cells(strip)
            for start, end in self.shadow.changed_runs(x, y, cells):
                out.append(f"\x1b[{y + 1};{x + start + 1}H")
                out.append(_render_cells(cells[start:end], console))
            self.shadow.record(x, y, cells, strip)
        return "".join(out)


def diffed(update, shadow: ShadowScreen):
    """`update` cut down to what changed, when it is one of the compositor's line updates."""
    if isinstance(update, (LayoutUpdate, ChopsUpdate)):
        return DiffedUpdate(update, shadow)
    return update

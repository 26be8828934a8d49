"""Write only the cells that changed: a copy of what the terminal shows, and Textual's updates cut down to
the runs of cells that differ from it (what curses does for nvitop).

Textual repaints a refreshed widget whole, and a whole screen when a pane's height changes: a chart that
moves by one sample a second, a "since" column that ticks, sent every second as full lines of truecolor
escapes (~20 KB/s at 200x50). Most of those cells are what the terminal already shows, so every update is
compared cell by cell with the copy. A resize (the terminal may reflow or clear) forgets the copy, so the
next update is written whole.

The pen (the terminal's current colours and attributes) is changed only where the style changes, as curses
does: Textual sets it and resets it around every piece of text, and a chart's head is a column of one-cell
pieces in one style, ~40 bytes a cell of escapes for 3 bytes of glyph.
"""

from __future__ import annotations

from functools import lru_cache

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import COLOR_SYSTEMS, Console
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate
from textual.strip import Strip

# Unchanged cells shorter than this between two changed runs are sent anyway: a cursor move costs ~8 bytes.
JOIN_GAP = 6
WIDE_TAIL = ""  # the char of the right half of a double-width character (drawn by the left half)


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


class Cells:
    """A piece of a line as cells: chars[i] and looks[i] (what is compared) and styles[i] (what is drawn)."""

    __slots__ = ("chars", "looks", "styles")

    def __init__(self, strip: Strip) -> None:
        chars: list[str] = []
        looks: list[Style | None] = []
        styles: list[Style | None] = []
        for text, style, control in strip:
            if control or not text:
                continue
            plain, blank = _looks(style)
            if text.isascii() or cell_len(text) == len(text):  # one cell per char: whole runs at C speed
                n = len(text)
                chars.extend(text)
                styles.extend([style] * n)
                if " " not in text:
                    looks.extend([plain] * n)
                elif not text.strip(" "):
                    looks.extend([blank] * n)
                else:
                    looks.extend([blank if c == " " else plain for c in text])
                continue
            for char in text:
                width = cell_len(char)
                if width == 0:  # a combining mark rides on the cell before it
                    at = len(chars) - 1
                    if at >= 0 and chars[at] == WIDE_TAIL:
                        at -= 1
                    if at >= 0:
                        chars[at] += char
                    continue
                chars.append(char)
                looks.append(blank if char == " " else plain)
                styles.append(style)
                if width == 2:
                    chars.append(WIDE_TAIL)
                    looks.append(plain)
                    styles.append(style)
        self.chars, self.looks, self.styles = chars, looks, styles


class ShadowScreen:
    """What the terminal shows, row by row: chars and looks (None: not known)."""

    def __init__(self) -> None:
        self.chars: dict[int, list[str | None]] = {}
        self.looks: dict[int, list[Style | None]] = {}

    def forget(self) -> None:
        self.chars.clear()
        self.looks.clear()

    def _row(self, y: int, end: int) -> tuple[list, list]:
        chars = self.chars.setdefault(y, [])
        looks = self.looks.setdefault(y, [])
        if len(chars) < end:
            chars.extend([None] * (end - len(chars)))
            looks.extend([None] * (end - len(looks)))
        return chars, looks

    def changed_runs(self, x: int, y: int, cells: Cells) -> list[tuple[int, int]]:
        """[(start, end)) offsets into `cells` that differ from the terminal, short gaps joined; the
        terminal's copy is updated to `cells`."""
        n = len(cells.chars)
        chars, looks = self._row(y, x + n)
        old_chars, old_looks = chars[x:x + n], looks[x:x + n]
        if old_chars == cells.chars and old_looks == cells.looks:
            return []
        chars[x:x + n] = cells.chars
        looks[x:x + n] = cells.looks
        runs: list[tuple[int, int]] = []
        start = end = -1
        new_chars, new_looks = cells.chars, cells.looks
        # Looks come from one cache (_looks), so an unchanged cell's is the same object: `is` first
        # spares Style.__eq__ on nearly every cell.
        differ = [offset for offset, a, b, c, d in zip(range(n), old_chars, new_chars, old_looks, new_looks)
                  if a != b or (c is not d and c != d)]
        for offset in differ:
            if start >= 0 and offset - end < JOIN_GAP:
                end = offset + 1
                continue
            if start >= 0:
                runs.append((start, end))
            start, end = offset, offset + 1
        if start >= 0:
            runs.append((start, end))
        # Never start or end inside a double-width character.
        fixed = []
        for start, end in runs:
            if new_chars[start] == WIDE_TAIL and start > 0:
                start -= 1
            if end < n and new_chars[end] == WIDE_TAIL:
                end += 1
            fixed.append((start, end))
        return fixed


@lru_cache(maxsize=4096)
def _pen(style: Style | None, system: ColorSystem) -> tuple[str, str]:
    """The escapes that start drawing in `style` and those that end it (a reset, a link's close), as
    Textual writes them."""
    if style is None:
        return "", ""
    on, _, off = Strip.render_style(style, "\x00", system).partition("\x00")
    return on, off


class PenWriter:
    """Text written in styles, the pen changed only where the style changes. Starts and ends with the pen
    reset (Textual's own writes leave it so)."""

    def __init__(self, console: Console) -> None:
        self.system = COLOR_SYSTEMS.get(console.color_system or "", ColorSystem.TRUECOLOR)
        self.out: list[str] = []
        self._on = self._off = ""

    def move(self, x: int, y: int) -> None:
        self.out.append(f"\x1b[{y + 1};{x + 1}H")  # the pen stays as it is across a cursor move

    def write(self, text: str, style: Style | None) -> None:
        on, off = _pen(style, self.system)
        if on != self._on:
            if off == self._off == "\x1b[0m" and on.startswith("\x1b["):
                self.out.append("\x1b[0;" + on[2:])  # reset and set in one sequence
            else:
                self.out.append(self._off)
                self.out.append(on)
            self._on, self._off = on, off
        self.out.append(text)

    def cells(self, cells: Cells, start: int, end: int) -> None:
        text: list[str] = []
        style: Style | None = None
        for char, cell_style in zip(cells.chars[start:end], cells.styles[start:end]):
            if char == WIDE_TAIL:
                continue
            if cell_style is not style and cell_style != style and text:
                self.write("".join(text), style)
                text = []
            style = cell_style
            text.append(char)
        if text:
            self.write("".join(text), style)

    def finish(self) -> str:
        self.out.append(self._off)
        self._on = self._off = ""
        return "".join(self.out)


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
        pen = PenWriter(console)
        for x, y, strip in _pieces(self.update):
            cells = Cells(strip)
            for start, end in self.shadow.changed_runs(x, y, cells):
                pen.move(x + start, y)
                pen.cells(cells, start, end)
        return pen.finish()


def diffed(update, shadow: ShadowScreen):
    """`update` cut down to what changed, when it is one of the compositor's line updates."""
    if isinstance(update, (LayoutUpdate, ChopsUpdate)):
        return DiffedUpdate(update, shadow)
    return update

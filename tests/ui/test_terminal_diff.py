"""The terminal copy (terminal_diff): after any sequence of updates the terminal shows exactly what Textual's
full updates would have shown, and an update that changes a few cells sends a few cells."""

from __future__ import annotations

import random

import pyte
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual._compositor import LayoutUpdate
from textual.geometry import Region
from textual.strip import Strip

from gpuwatch_tui.ui.terminal_diff import ShadowScreen, diffed

WIDTH, HEIGHT = 40, 6
STYLES = [Style(color="#87d75f", bgcolor="#262626"), Style(color="#d0d0d0", bgcolor="#262626", bold=True),
          Style(color="#8a8a8a", bgcolor="#262626", meta={"offset": (0, 1)}), Style(bgcolor="#5f0000"),
          Style(color="#ffffff", bgcolor="#262626", underline=True, reverse=True), Style(italic=True), None]
GLYPHS = "ab█▇ ·界"  # 界 is two cells wide


def random_lines(rng: random.Random) -> list[Strip]:
    lines = []
    for _ in range(HEIGHT):
        segments, width = [], 0
        while width < WIDTH:
            char = rng.choice(GLYPHS)
            size = 2 if char == "界" else 1
            if width + size > WIDTH:
                char, size = " ", 1
            segments.append(Segment(char * 1, rng.choice(STYLES)))
            width += size
        lines.append(Strip(segments))
    return lines


def mutate(lines: list[Strip], rng: random.Random, cells: int) -> list[Strip]:
    """A copy with a few cells changed (a ticking number, a moving chart head)."""
    out = []
    for strip in lines:
        segments = list(strip)
        for _ in range(cells):
            at = rng.randrange(len(segments))
            if segments[at].text != "界":
                segments[at] = Segment(rng.choice("abc█·"), rng.choice(STYLES))
        out.append(Strip(segments))
    return out


def screen_of(writes: list[str]) -> list[list[tuple]]:
    screen = pyte.Screen(WIDTH, HEIGHT)
    stream = pyte.Stream(screen)
    for data in writes:
        stream.feed(data)
    return [[(c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse)
             for c in (screen.buffer[y][x] for x in range(WIDTH))]
            for y in range(HEIGHT)]


def update_of(lines: list[Strip]) -> LayoutUpdate:
    return LayoutUpdate([[line] for line in lines], Region(0, 0, WIDTH, HEIGHT))


def test_diffed_updates_leave_the_screen_textual_would_have_drawn_and_send_less():
    console = Console(color_system="truecolor", width=WIDTH, force_terminal=True)
    rng = random.Random(7)
    frames = [random_lines(rng)]
    for n in range(30):
        frames.append(mutate(frames[-1], rng, cells=1 + n % 4) if n % 10 else random_lines(rng))
    full = [update_of(f).render_segments(console) for f in frames]
    shadow = ShadowScreen()
    cut = [diffed(update_of(f), shadow).render_segments(console) for f in frames]
    for upto in range(1, len(frames) + 1):  # the same screen after every frame, not only the last
        assert screen_of(cut[:upto]) == screen_of(full[:upto])
    small = [n + 1 for n in range(30) if n % 10]  # frames that changed a few cells
    assert sum(len(cut[i]) for i in small) * 5 < sum(len(full[i]) for i in small)
    assert cut[0] and len(cut[0]) >= len(full[0]) * 0.5  # the first frame is written whole


def test_an_unchanged_frame_sends_nothing_and_forget_sends_it_all_again():
    console = Console(color_system="truecolor", width=WIDTH, force_terminal=True)
    lines = random_lines(random.Random(3))
    shadow = ShadowScreen()
    first = diffed(update_of(lines), shadow).render_segments(console)
    assert diffed(update_of(lines), shadow).render_segments(console) == ""
    # Textual's mouse metadata differs between frames but draws nothing: still nothing to send
    moved = [Strip([Segment(s.text, s.style + Style(meta={"offset": (9, 9)}) if s.style else s.style)
                    for s in line]) for line in lines]
    assert diffed(update_of(moved), shadow).render_segments(console) == ""
    shadow.forget()  # a resize: the terminal may have lost it
    assert screen_of([diffed(update_of(lines), shadow).render_segments(console)]) == screen_of([first])


def test_a_column_of_changed_cells_in_one_style_sets_the_pen_once():
    """A chart's head: one cell on each row changes, all in the bar's style."""
    console = Console(color_system="truecolor", width=WIDTH, force_terminal=True)
    bar, back = Style(color="#87d75f", bgcolor="#262626"), Style(color="#d0d0d0", bgcolor="#262626")
    shadow = ShadowScreen()
    before = [Strip([Segment(" " * WIDTH, back)]) for _ in range(HEIGHT)]
    after = [Strip([Segment(" " * 10, back), Segment("█", bar), Segment(" " * (WIDTH - 11), back)])
             for _ in range(HEIGHT)]
    first = diffed(update_of(before), shadow).render_segments(console)
    sent = diffed(update_of(after), shadow).render_segments(console)
    assert screen_of([first, sent]) == screen_of([update_of(after).render_segments(console)])
    assert sent.count("38;2;135;215;95") == 1  # the bar's colour once, not once a row
    assert len(sent.encode()) <= 48 + HEIGHT * 12  # the pen, then a cursor move and a glyph a row

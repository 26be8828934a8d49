"""The key bar at the bottom of a screen: the keys that work here, drawn as one line by one widget.

Textual's Footer rebuilds one child widget per key whenever the bindings change, which is on every
focus change (tab, opening a job, going back): each new key widget is mounted and restyled, about
100 ms a key press on two shared cores. This widget keeps a list of (key, label) and redraws its
one line; what it shows and how it looks is the same (the footer theme variables, the command
palette key at the right edge), and a click on a key presses it as before.
"""

from __future__ import annotations

from typing import NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget


DIM, NO_STYLE = Style(dim=True), Style()


class FooterEntry(NamedTuple):
    key: str  # Textual's key name, pressed on a click
    display: str  # what the bar shows for it ("⏎", "/", "^p")
    description: str
    enabled: bool


class KeyFooter(Widget):
    """The screen's shown bindings, in the order Textual's Footer uses; the command palette key
    docked at the right edge."""

    COMPONENT_CLASSES = {"key-footer--key", "key-footer--description", "key-footer--edge"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyFooter > .key-footer--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyFooter > .key-footer--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    KeyFooter > .key-footer--edge {
        color: $foreground 20%;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: tuple[FooterEntry, ...] = ()
        self.palette_entry: FooterEntry | None = None
        self._spans: list[tuple[int, int, FooterEntry]] = []  # x range -> entry, for clicks

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        active = screen.active_bindings
        entries: dict[str, FooterEntry] = {}  # one entry per action, its first shown binding
        for _node, binding, enabled, _tooltip in active.values():
            if binding.show and binding.action not in entries:
                entries[binding.action] = FooterEntry(binding.key, self.app.get_key_display(binding),
                                                      binding.description, enabled)
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in active:
            _node, binding, enabled, _tooltip = active[self.app.COMMAND_PALETTE_BINDING]
            palette = FooterEntry(binding.key, self.app.get_key_display(binding), binding.description, enabled)
        new = tuple(entries.values())
        if (new, palette) != (self.entries, self.palette_entry):
            self.entries, self.palette_entry = new, palette
            self.refresh()  # one line repainted; no widget mounted or restyled

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-footer--key")
        description_style = self.get_component_rich_style("key-footer--description")
        width = self.size.width
        edge_style = self.get_component_rich_style("key-footer--edge")
        # Full words when they fit; on a narrow terminal (80 columns) the first word of each, then keys
        # alone, so every key stays readable instead of the last ones being cut.
        for words in (None, 1, 0):
            line, spans = self._keys_line(key_style, description_style, words)
            edge = Text(no_wrap=True, end="")
            if self.palette_entry is not None:
                entry = self.palette_entry
                edge.append("▏", edge_style)
                edge.append(entry.display, key_style)
                if words is None:
                    edge.append(f" {entry.description} ", description_style)
                else:
                    edge.append(" ", description_style)
            if line.cell_len + edge.cell_len <= width:
                break
        room = max(0, width - edge.cell_len)
        line.truncate(room, overflow="crop")
        line.pad_right(room - line.cell_len)
        if edge:
            spans = [s for s in spans if s[0] < room] + [(room, width, self.palette_entry)]
        self._spans = spans
        line.append_text(edge)
        return line

    def _keys_line(self, key_style, description_style, words: int | None) -> tuple[Text, list]:
        line = Text(no_wrap=True, overflow="crop", end="")
        spans = []
        for entry in self.entries:
            start = line.cell_len
            dim = DIM if not entry.enabled else NO_STYLE
            line.append(f" {entry.display} ", key_style + dim)
            description = entry.description if words is None else " ".join(entry.description.split()[:words])
            if description:
                line.append(f"{description} ", description_style + dim)
            spans.append((start, line.cell_len, entry))
        return line, spans

    def on_click(self, event: events.Click) -> None:
        for start, end, entry in self._spans:
            if start <= event.x < end:
                if entry.enabled:
                    self.app.simulate_key(entry.key)
                else:
                    self.app.bell()
                return

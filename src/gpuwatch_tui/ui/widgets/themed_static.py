"""A Static whose text is built from data with theme colours, rebuilt when the theme changes."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..palette import Palette, Themed
from ..safe_rich import safe_rich


class ThemedStatic(Themed, Static):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._args: tuple = ()

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        if self._args:
            self.update(safe_rich(self.build(*self._args)))

    def clear(self) -> None:
        """Empty, as when first mounted (a reused pane shown for another item)."""
        if self._args:
            self._args = ()
            self.update("")

    def show(self, *args) -> None:
        if args == self._args:
            return  # unchanged data: no repaint
        self._args = args
        self.update(safe_rich(self.build(*args)))

    def build(self, *args) -> Text:  # pragma: no cover - abstract
        raise NotImplementedError

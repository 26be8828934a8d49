"""Rich styles from the current theme's variables, for widgets that draw their own text."""

from __future__ import annotations

from rich.style import Style
from textual.color import Color, ColorParseError


class Palette:
    """Maps theme variable names ("util-high", "phase-stalled") to Rich styles.

    Built from `App.theme_variables`; rebuilt when the theme changes. Colours stay theme colours:
    Textual downgrades them to 256 or 16 colours when the terminal has no true colour.
    """

    def __init__(self, variables: dict[str, str]) -> None:
        self._variables = variables
        self._cache: dict[tuple[str, bool, bool], Style] = {}

    def color(self, name: str):
        value = self._variables.get(name)
        if value is None:
            return None
        try:
            return Color.parse(value).rich_color
        except ColorParseError:
            return None

    def style(self, name: str, bold: bool = False, dim: bool = False) -> Style:
        key = (name, bold, dim)
        style = self._cache.get(key)
        if style is None:
            style = Style(color=self.color(name), bold=bold or None, dim=dim or None)
            self._cache[key] = style
        return style


class Themed:
    """Mixin for widgets that colour their own text: `palette` is built from the app's theme on
    first use; a widget's `theme_changed` replaces it by setting `_palette`."""

    _palette: Palette | None = None

    @property
    def palette(self) -> Palette:
        if self._palette is None:
            self._palette = Palette(self.app.theme_variables)
        return self._palette

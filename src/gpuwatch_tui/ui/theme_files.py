"""Theme files (TOML) -> Textual themes.

Built-in themes ship in the package (top-level `themes/` folder); users add their own in
`themes_dir`. A file that cannot be used becomes one problem string, reported once by the app.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

DEFAULT_THEME = "gpuwatch-dark"
BASE_COLOR_KEYS = (
    "primary", "secondary", "warning", "error", "success", "accent",
    "foreground", "background", "surface", "panel", "boost",
)


@dataclass
class ThemeSet:
    themes: dict[str, Theme] = field(default_factory=dict)  # in load order: built-in first
    problems: list[str] = field(default_factory=list)


def builtin_themes_dir() -> Path:
    """Where the packaged theme files are (the package symlink, or the checkout's folder)."""
    beside = Path(__file__).resolve().parents[1] / "themes"  # an installed or checked-out package
    if beside.is_dir():
        return beside  # without importing importlib.resources (and zipfile) before the first frame
    try:
        from importlib import resources

        packaged = Path(str(resources.files("gpuwatch_tui") / "themes"))
        if packaged.is_dir():
            return packaged
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[3] / "themes"


def theme_from_file(path: Path) -> Theme:
    """Parse one theme file; raises ValueError with a message naming file and key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path}: not valid TOML: {error}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{path}: name: expected a non-empty string")
    colors = data.get("colors", {})
    variables = data.get("variables", {})
    if not isinstance(colors, dict) or not isinstance(variables, dict):
        raise ValueError(f"{path}: [colors] and [variables] must be tables")
    unknown = sorted(set(colors) - set(BASE_COLOR_KEYS))
    if unknown:
        raise ValueError(f"{path}: colors.{unknown[0]}: expected one of {', '.join(BASE_COLOR_KEYS)}")
    if "primary" not in colors:
        raise ValueError(f"{path}: colors.primary: expected a colour")
    for table, values in (("colors", colors), ("variables", variables)):
        for key, value in values.items():
            try:
                Color.parse(value)
            except (ColorParseError, TypeError, ValueError):
                raise ValueError(f"{path}: {table}.{key}: expected a colour, got {value!r}") from None
    try:
        return Theme(
            name=name,
            dark=bool(data.get("dark", True)),
            luminosity_spread=float(data.get("luminosity_spread", 0.15)),
            variables={str(k): str(v) for k, v in variables.items()},
            **{k: str(v) for k, v in colors.items()},
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: {error}") from None


def load_themes(themes_dir: Path | None = None) -> ThemeSet:
    """Built-in themes, then the user's (which may replace a built-in of the same name)."""
    result = ThemeSet()
    folders = [builtin_themes_dir()]
    if themes_dir is not None and Path(themes_dir).is_dir():
        folders.append(Path(themes_dir))
    for folder in folders:
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = theme_from_file(path)
            except ValueError as error:
                result.problems.append(str(error))
                continue
            result.themes[theme.name] = theme
    return result

"""Theme files: shipped themes load, user themes add or replace, broken ones are reported once."""

from __future__ import annotations

import re
from pathlib import Path

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.levels import FALLBACK_VARIABLES
from gpuwatch_tui.ui.theme_files import builtin_themes_dir, load_themes

UI = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui" / "ui"


def test_builtin_themes_load_and_declare_every_variable():
    loaded = load_themes()
    assert loaded.problems == []
    assert {"gpuwatch-dark", "gpuwatch-light", "gpuwatch-high-contrast"} <= set(loaded.themes)
    for theme in loaded.themes.values():
        missing = set(FALLBACK_VARIABLES) - set(theme.variables)
        assert not missing, f"{theme.name} lacks {sorted(missing)}"


def test_builtin_themes_are_inside_the_package():
    assert (builtin_themes_dir() / "dark.toml").is_file()
    assert builtin_themes_dir().resolve() == (UI.parents[2] / "themes").resolve()


def test_stylesheets_use_theme_variables_not_hex_colours():
    for tcss in UI.rglob("*.tcss"):
        text = re.sub(r"/\*.*?\*/", "", tcss.read_text(), flags=re.S)
        assert not re.search(r"#[0-9a-fA-F]{3,8}\b", text), f"hex colour in {tcss}"
        assert not re.search(r"\b(rgb|hsl)a?\(", text), f"literal colour in {tcss}"


def test_user_theme_is_added(tmp_path):
    (tmp_path / "mine.toml").write_text('name = "mine"\n[colors]\nprimary = "#00aa00"\n[variables]\nutil-high = "#00ff00"\n')
    loaded = load_themes(tmp_path)
    assert "mine" in loaded.themes and loaded.problems == []


def test_broken_theme_is_reported_once_and_default_used(tmp_path, source):
    (tmp_path / "broken.toml").write_text('name = "broken"\n[colors]\nprimary = "not-a-colour"\n')
    (tmp_path / "bad-toml.toml").write_text("name = \n")
    app = GpuwatchApp(source, theme="broken", themes_dir=tmp_path)
    assert app.theme == "gpuwatch-dark"
    assert len(app.theme_problems) == 3  # two bad files, one unknown theme name
    assert any("colors.primary" in p and "broken.toml" in p for p in app.theme_problems)


async def test_broken_theme_notified_once(tmp_path, source):
    (tmp_path / "broken.toml").write_text('name = "broken"\n[colors]\nprimary = "nope"\n')
    app = GpuwatchApp(source, themes_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("t")  # switching themes does not report it again
        await pilot.pause()
        errors = [n for n in app._notifications if n.severity == "error"]
        assert len(errors) == 1 and "broken.toml" in errors[0].message


async def test_textual_builtin_theme_gets_gpuwatch_variables(source):
    app = GpuwatchApp(source, theme="textual-light")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme_variables["util-high"]


# -- every phase and utilisation level tells apart, in true colour and on 16-colour terminals ------

from itertools import combinations  # noqa: E402

import pytest  # noqa: E402
from rich.color import Color as RichColor, ColorSystem  # noqa: E402

from gpuwatch_tui.ui.levels import PHASES  # noqa: E402

ANSI16 = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white", "bright_black", "bright_red",
          "bright_green", "bright_yellow", "bright_blue", "bright_magenta", "bright_cyan", "bright_white"]
# On a 16-colour terminal these read badly (or not at all) on that kind of background.
UNREADABLE_16 = {"dark": {"black", "blue"},
                 "light": {"white", "bright_white", "bright_yellow", "bright_green", "bright_cyan"}}
UTIL_LEVELS = ("util-idle", "util-low", "util-mid", "util-high")
ATTENTION = ("phase-silent", "phase-stalled", "phase-crashed")  # the phases that need a person


def _rgb(value: str) -> tuple[int, int, int]:
    t = RichColor.parse(value).get_truecolor()
    return t.red, t.green, t.blue


def _ansi16(value: str) -> str:
    return ANSI16[RichColor.parse(value).downgrade(ColorSystem.STANDARD).number]


def _luminance(value: str) -> float:
    def channel(c: int) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = _rgb(value)
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _distance(a: str, b: str) -> float:
    return sum((x - y) ** 2 for x, y in zip(_rgb(a), _rgb(b))) ** 0.5


BUILTIN = ["gpuwatch-dark", "gpuwatch-light", "gpuwatch-high-contrast"]


@pytest.mark.parametrize("name", BUILTIN)
def test_phases_and_levels_are_distinct_and_readable(name):
    theme = load_themes().themes[name]
    colours = {**theme.variables, "background": theme.background}
    phases = [f"phase-{p}" for p in PHASES]
    for group in (phases, UTIL_LEVELS):
        for a, b in combinations(group, 2):
            assert _distance(colours[a], colours[b]) >= 60, f"{name}: {a} and {b} look alike"
        for key in group:
            assert _contrast(colours[key], colours["background"]) >= 3.0, f"{name}: {key} too faint"


@pytest.mark.parametrize("name", BUILTIN)
def test_16_colour_terminals_keep_them_readable(name):
    """TERM=xterm: Textual sends the nearest of the 16 ANSI colours."""
    theme = load_themes().themes[name]
    kind = "dark" if theme.dark else "light"
    colours = theme.variables
    background = _ansi16(theme.background)
    for key in [f"phase-{p}" for p in PHASES] + list(UTIL_LEVELS) + ["muted"]:
        ansi = _ansi16(colours[key])
        assert ansi != background and ansi not in UNREADABLE_16[kind], f"{name}: {key} -> {ansi}"
    # the phases that need a person differ from each other and from healthy training
    shown = [_ansi16(colours[key]) for key in (*ATTENTION, "phase-training")]
    assert len(set(shown)) == len(shown), f"{name}: {dict(zip((*ATTENTION, 'phase-training'), shown))}"
    levels = [_ansi16(colours[key]) for key in UTIL_LEVELS]
    assert len(set(levels)) == len(levels), f"{name}: utilisation levels {levels}"


async def test_no_color_reverses_the_cursor_row(monkeypatch):
    from gpuwatch_tui.ui.recorded_source import RecordedSource
    from gpuwatch_tui.ui.widgets.jobs_table import JobsTable

    from .conftest import FLEET

    monkeypatch.setenv("NO_COLOR", "1")
    app = GpuwatchApp(RecordedSource(FLEET))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(JobsTable)
        assert app.no_color and table.get_component_rich_style("jobs-table--cursor").reverse


async def test_16_colour_terminal_reverses_the_cursor_row():
    from gpuwatch_tui.ui.app import few_colours
    from gpuwatch_tui.ui.recorded_source import RecordedSource
    from gpuwatch_tui.ui.widgets.jobs_table import JobsTable

    from .conftest import FLEET

    assert few_colours("standard") and not few_colours("256") and not few_colours("truecolor")
    app = GpuwatchApp(RecordedSource(FLEET), theme="gpuwatch-light")
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.screen.query_one(JobsTable)
        assert not table.get_component_rich_style("jobs-table--cursor").reverse
        app.add_class("-few-colours")  # what on_mount does when Rich detects 16 colours (TERM=xterm)
        await pilot.pause()
        assert table.get_component_rich_style("jobs-table--cursor").reverse


@pytest.mark.parametrize("name", ["gpuwatch-dark", "gpuwatch-high-contrast", "gpuwatch-light", "textual-light"])
async def test_start_up_theme_matches_a_theme_switched_to(name, monkeypatch):
    """The first theme is set without Textual's watcher when it is as dark as the default (that
    watcher's CSS refresh parsed every stylesheet twice at start-up); the result must be the same
    as switching to that theme later: variables, classes and the painted colours."""
    from textual.app import App

    from gpuwatch_tui.ui.recorded_source import RecordedSource
    from gpuwatch_tui.ui.widgets.jobs_table import JobsTable

    from .conftest import FLEET

    refreshes: list[bool] = []
    original = App.refresh_css
    monkeypatch.setattr(App, "refresh_css", lambda self, animate=True: (refreshes.append(True),
                                                                        original(self, animate))[1])
    app = GpuwatchApp(RecordedSource(FLEET), theme=name)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        theme = app.get_theme(name)
        if theme.dark:
            assert refreshes == [], "a dark first theme must not refresh the CSS at start-up"
        table = app.screen.query_one(JobsTable)
        started = (dict(app.theme_variables), set(app.classes), table.get_component_rich_style("jobs-table--cursor"),
                   app.screen.rich_style)
        app.theme = "gpuwatch-light" if name != "gpuwatch-light" else "gpuwatch-dark"
        await pilot.pause()
        app.theme = name
        await pilot.pause()
        switched = (dict(app.theme_variables), set(app.classes), table.get_component_rich_style("jobs-table--cursor"),
                    app.screen.rich_style)
        assert started[0] == switched[0]
        assert {c for c in started[1] if c.startswith("-")} >= {f"-theme-{name}",
                                                               "-dark-mode" if theme.dark else "-light-mode"}
        assert started[1] - {"-theme-textual-dark"} == switched[1] - {"-theme-textual-dark"}
        assert started[2:] == switched[2:]


async def test_other_screens_styles_are_parsed_when_the_first_one_opens():
    """screens.tcss (job pane, help, dialogs, stack view) is not parsed before the first frame, is
    in force once a screen above the dashboard opens, and survives a theme change."""
    from gpuwatch_tui.ui.app import SCREENS_CSS
    from gpuwatch_tui.ui.recorded_source import RecordedSource

    from .conftest import FLEET

    app = GpuwatchApp(RecordedSource(FLEET))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not app.stylesheet.has_source(str(SCREENS_CSS))
        await pilot.press("question_mark")
        await pilot.pause()
        box = app.screen.query_one("#help-box")
        assert app.stylesheet.has_source(str(SCREENS_CSS))
        assert box.styles.width.value == 90 and box.styles.border_top[0] == "round"
        app.theme = "gpuwatch-light"
        await pilot.pause()
        from textual.color import Color

        assert box.styles.width.value == 90
        assert box.styles.background == Color.parse(app.get_css_variables()["surface"])

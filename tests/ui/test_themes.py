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

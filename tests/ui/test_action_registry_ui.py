"""The one action registry drives the bindings, the help screen, the command palette and the keys
shown under a verdict; --readonly removes kill / restart / dump from all of them."""

from __future__ import annotations

import io

from rich.console import Console
from textual.command import CommandList, CommandPalette

from gpuwatch_tui.actions.registry import ACTIONS, by_name
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.commands import GpuwatchCommands
from gpuwatch_tui.ui.screens.help_screen import HelpScreen, binding_rows
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.verdict_panel import VerdictPanel

from .helpers import notifications, static_text

SIZE = (120, 40)
UNSAFE = [a for a in ACTIONS if not a.readonly_safe]
SFT = "trainer-e:51877"  # sft-nohup: the buffered-stdout job of the recorded fleet


def help_everywhere(app) -> dict[str, str]:
    return {what: key for where, key, what in binding_rows(app) if where == "everywhere"}


def palette_titles(app) -> list[str]:
    return [name for name, _, _ in GpuwatchCommands(app.screen)._commands() if not name.startswith("Open job")]


async def palette_hits(pilot, app, query: str) -> list[str]:
    await pilot.press("ctrl+p")
    await pilot.pause()
    assert isinstance(app.screen, CommandPalette)
    await pilot.press(*query)
    await pilot.pause(0.3)
    options = app.screen.query_one(CommandList)
    hits = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
    await pilot.press("escape")
    await pilot.pause()
    return hits


def test_unsafe_actions_are_kill_restart_dump_reap():
    assert [a.name for a in UNSAFE] == ["kill", "restart_unbuffered", "dump_stack", "reap"]


async def test_bindings_help_and_palette_list_every_action_with_its_registry_title(app):
    async with app.run_test(size=SIZE) as pilot:
        bound = {b.action: b for b in GpuwatchApp.BINDINGS}
        assert bound["job_action('kill')"].key == "K" and bound["job_action('kill')"].description == "Kill"
        assert bound["help"].key == "question_mark" and bound["help"].key_display == "?"
        rows = help_everywhere(app)
        for spec in ACTIONS:
            assert rows[spec.title] == spec.key, spec.name
        assert palette_titles(app) == [spec.title for spec in ACTIONS]
        assert any("Restart with -u" in hit for hit in await palette_hits(pilot, app, "restart"))
        await pilot.press("down", "K")
        # The recorded fleet cannot act on hosts: the key is bound and says so (test_actions_dialog.py has the rest).
        assert notifications(app)[-1].startswith("kill")


async def test_readonly_removes_unsafe_actions_from_keys_help_and_palette(source):
    app = GpuwatchApp(source, readonly=True, min_refresh_interval=0)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("down")
        for spec in UNSAFE:
            assert spec.key not in app.active_bindings
            await pilot.press(spec.key)
        assert notifications(app) == []  # the keys do not exist, not even to say "disabled"
        rows = help_everywhere(app)
        assert not {spec.title for spec in UNSAFE} & set(rows)
        assert rows["Dismiss ended job"] == "x" and rows["Quit"] == "q"  # the safe ones stay
        assert palette_titles(app) == [spec.title for spec in ACTIONS if spec.readonly_safe]
        assert not any("Restart" in hit for hit in await palette_hits(pilot, app, "restart"))
        assert not any("Kill" in hit for hit in await palette_hits(pilot, app, "kill"))
        # The palette's commands run through the same check as the keys.
        await app.run_action("job_action('kill')")
        assert notifications(app) == []
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(app.screen.query_one("#help-table").content)  # the rich Table the screen shows
        shown = console.export_text()
        assert "Dismiss ended job" in shown and "Restart with -u" not in shown and "py-spy dump" not in shown


def advise_restart(source) -> None:
    source.set_job(SFT, advice="output is sitting in the process's stdout buffer: restart it with -u to see it",
                   actions=("restart_unbuffered", "dump_stack"))


async def open_sft(app, pilot) -> str:
    app.open_job(SFT)
    await pilot.pause()
    assert isinstance(app.screen, JobScreen)
    return static_text(app.screen.query_one(VerdictPanel))


async def test_verdict_panel_shows_the_keys_of_the_advised_actions(app, source):
    advise_restart(source)
    async with app.run_test(size=SIZE) as pilot:
        verdict = await open_sft(app, pilot)
        assert "restart it with -u to see it" in verdict
        assert "u: restart with -u · d: py-spy dump" in verdict
        assert by_name("restart_unbuffered").key == "u"


async def test_verdict_panel_in_readonly_offers_no_key_it_would_refuse(source):
    advise_restart(source)
    app = GpuwatchApp(source, readonly=True, min_refresh_interval=0)
    async with app.run_test(size=SIZE) as pilot:
        verdict = await open_sft(app, pilot)
        assert "restart it with -u to see it" in verdict  # the advice itself stays: it is a fact
        assert "u: restart" not in verdict and "d: py-spy" not in verdict

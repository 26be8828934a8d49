"""The key bar: shows the keys that work for the focused pane, follows focus without mounting
anything (Textual's Footer rebuilt a widget per key on every tab), and a click presses a key."""

from __future__ import annotations

from gpuwatch_tui.ui.widgets.gpu_processes import GpuProcessTable
from gpuwatch_tui.ui.widgets.key_footer import KeyFooter


def footer_text(app) -> str:
    return app.screen.query_one(KeyFooter).render().plain


async def test_the_bar_follows_focus_and_mounts_nothing(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.focused.id == "jobs"
        text = footer_text(app)
        assert " ⏎ Open " in text and " q Quit " in text and text.rstrip().endswith("▏^p palette")
        widgets_before = len(list(app.screen.walk_children()))
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused.id == "gpu-grid"
        shown = {b.description for _n, b, _e, _t in app.screen.active_bindings.values() if b.show}
        text = footer_text(app)
        assert all(f"{d} " in text for d in shown), (shown, text)
        assert "Dismiss" not in text  # the jobs table's own key went with its focus
        await pilot.press("shift+tab")
        await pilot.pause()
        assert " ⏎ Open " in footer_text(app)
        assert len(list(app.screen.walk_children())) == widgets_before


async def test_a_click_on_a_key_presses_it(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = footer_text(app)
        await pilot.click(KeyFooter, offset=(text.index(" g ") + 1, 0))
        await pilot.pause()
        assert app.screen.query_one(GpuProcessTable).display


async def test_a_narrow_terminal_keeps_the_palette_key_at_the_edge(app):
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = footer_text(app)
        # every key readable: descriptions shortened to their first word, not the last keys cut
        assert len(text) == 80 and text.rstrip().endswith("▏^p")
        assert all(part in text for part in ("g GPU", "q Quit", "p Pause", "t Theme"))
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert footer_text(app).endswith("▏^p palette ") and "g GPU processes" in footer_text(app)

"""What reaches the terminal is what the history draws: the lines a new sample adds (the first samples
after "no samples yet", a chart label that stays the same from then on) are painted, not only the ones
that differ from the frame before. Textual's updates are fed to a terminal emulator, as a pty would be."""

from __future__ import annotations

import pyte
from rich.console import Console
from textual.app import App

from gpuwatch_tui.model import GpuSample, HostSample
from gpuwatch_tui.store import Store
from gpuwatch_tui.ui.widgets.history_view import HistoryView

WIDTH, HEIGHT = 100, 30


class PaintedApp(App):
    """The history alone, its frames written into a pyte screen instead of a terminal."""

    def __init__(self) -> None:
        super().__init__()
        self.terminal = pyte.Screen(WIDTH, HEIGHT)
        self._stream = pyte.Stream(self.terminal)
        self._out = Console(color_system="truecolor", width=WIDTH, force_terminal=True)

    def compose(self):
        yield HistoryView()

    def _display(self, screen, renderable) -> None:
        if renderable is not None:
            self._stream.feed(renderable.render_segments(self._out))

    def shown(self) -> list[str]:
        return [line.rstrip() for line in self.terminal.display]


def gpu(util: float) -> GpuSample:
    return GpuSample(0, "GPU-0", "NVIDIA H200", util_pct=util, mem_used_mib=71_885.5, mem_total_mib=143_771.0,
                     power_w=400.0, power_limit_w=700.0, processes=())


async def test_labels_that_come_with_the_first_samples_reach_the_terminal():
    store = Store(["a"], history=20)
    app = PaintedApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        view = app.query_one(HistoryView)
        view.select("a", 0)
        view.show(store)  # the host is known, no sample yet: a title and nothing else
        await pilot.pause()
        assert any("no samples yet" in line for line in app.shown())
        for t in range(4):  # the labels stay the same from the first sample on; the bars move
            store.apply_sample("a", HostSample(float(t), "nvml", [gpu(50.0 + t)], {}))
            view.show(store)
            await pilot.pause()
        drawn = [strip.text.rstrip() for strip in (view.render_line(y) for y in range(view.size.height))]
        assert app.shown()[: len(drawn)] == drawn
        labels = [line for line in app.shown() if line.lstrip().startswith(("memory", "power"))]
        assert len(labels) == 2, app.shown()

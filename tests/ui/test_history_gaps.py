"""A value the driver did not give is a gap in the history, not a measured zero: the store keeps
None, the sparkline and the GPU grid draw a dim dot there."""

from __future__ import annotations

import dataclasses

from rich.style import Style
from rich.text import Span

from gpuwatch_tui.model import GpuSample, HostSample
from gpuwatch_tui.store import Store
from gpuwatch_tui.ui.sparkline import NO_DATA, sparkline
from gpuwatch_tui.ui.widgets.gpu_grid import GpuGrid

from .helpers import lines_of


def _gpu(util, mem, power) -> GpuSample:
    return GpuSample(0, "GPU-0", "NVIDIA H200", util, mem, 143_771.0 if mem is not None else None, 40.0, power,
                     700.0, 1980.0)


def test_store_keeps_none_in_history():
    store = Store(["h"], history=10)
    for t, (util, mem, power) in enumerate([(50.0, 71_885.5, 400.0), (None, None, None), (0.0, 0.0, 78.0)]):
        store.apply_sample("h", HostSample(float(t), "nvml", [_gpu(util, mem, power)], {}))
    record = store.hosts["h"].gpus[0]
    assert list(record.util_history) == [50.0, None, 0.0]
    assert list(record.mem_history) == [50.0, None, 0.0]
    assert list(record.power_history) == [400.0, None, 78.0]


def test_sparkline_draws_a_gap_for_none_and_a_block_for_zero():
    level, empty = Style(color="green"), Style(dim=True)
    text = sparkline([0.0, None, None, 100.0], 6, lambda v: level, empty)
    assert text.plain == f"{NO_DATA * 2}▁{NO_DATA * 2}█"
    assert text.spans == [Span(0, 2, empty), Span(2, 3, level), Span(3, 5, empty), Span(5, 6, level)]


async def test_gpu_grid_shows_unmeasured_utilisation_as_a_gap(app, source):
    async with app.run_test(size=(200, 50)) as pilot:
        grid = app.screen.query_one(GpuGrid)
        host = source.store.hosts["trainer-a"]
        for _ in range(3):  # three frames in which the driver could not say trainer-a GPU 0's utilisation
            samples = [r.latest for _, r in sorted(host.gpus.items())]
            samples[0] = dataclasses.replace(samples[0], util_pct=None)
            source.store.apply_sample("trainer-a", HostSample(source.now(), "nvml", samples, host.procs))
        source.notify()
        await pilot.pause()
        row = next(i for i, r in enumerate(grid._rows) if r.kind == "gpus" and r.host == "trainer-a" and 0 in r.gpus)
        cell = lines_of(grid)[row + grid.HEADER_LINES].split(" 0 ", 1)[1]  # GPU 0's cell, from its utilisation sparkline on
        spark = cell[: grid.spark_width(grid._cell_width(grid.size.width))]
        assert spark.endswith(NO_DATA * 3)  # the three unmeasured frames: a gap...
        assert spark.strip(NO_DATA)  # ...after the measured blocks
        assert cell[len(spark):].startswith("   - ")  # and no utilisation figure now

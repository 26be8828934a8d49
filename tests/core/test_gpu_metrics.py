"""One declaration per GPU metric (probe/gpu_metrics.py): every layer reads the table, so each row shows in the
GPU record, the frame parser, status --json, the status table, the recording, the Prometheus export and the
DCGM feed, with nothing else spelled per metric. Each metric gets its own value here, so a layer that drops,
swaps or mis-scales one fails."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwatch_tui.export.collector import GpuwatchCollector
from gpuwatch_tui.feeds import dcgm
from gpuwatch_tui.model import GpuProcess, GpuSample, HostSample
from gpuwatch_tui.probe import gpu_metrics
from gpuwatch_tui.feeds.probe_frames import FactCache, parse_gpu, parse_sample
from gpuwatch_tui.recording import format as fmt
from gpuwatch_tui.status_table import render_status
from gpuwatch_tui.store import Store

# A distinct whole number per metric (whole: the JSON and the tables print them unrounded).
VALUES = {m.name: float(101 + 7 * i) for i, m in enumerate(gpu_metrics.METRICS)}


def sample(**changes) -> GpuSample:
    return GpuSample(index=3, uuid="GPU-3", name="NVIDIA H200", processes=(GpuProcess(42, 10.0),),
                     **{**VALUES, **changes})


def test_the_table_is_consistent():
    names = [m.name for m in gpu_metrics.METRICS]
    assert len(set(names)) == len(names)
    assert set(gpu_metrics.READINGS) | set(gpu_metrics.FACTS) == set(names)
    for field in ("smi", "dcgm"):
        values = [getattr(m, field) for m in gpu_metrics.METRICS if getattr(m, field)]
        assert len(set(values)) == len(values), field
    proms = [m.prom[0] for m in gpu_metrics.METRICS if m.prom]
    assert len(set(proms)) == len(proms) and all(p.startswith("gpuwatch_gpu_") for p in proms)
    for m in gpu_metrics.METRICS:
        assert m.of is None or m.of in gpu_metrics.BY_NAME
        assert m.nvml is None or (m.nvml[0].startswith("nvmlDeviceGet") and m.kind == gpu_metrics.READING)
        assert m.level in (None, "util", "mem", "temp", "load")
        assert m.grid is None or m.grid[1].format(100.0).strip()
    with pytest.raises(ValueError, match="cadence"):
        gpu_metrics.GpuMetric("x", "", "x", cadence="hourly")


def test_the_gpu_record_has_a_field_per_metric_in_table_order():
    fields = [f.name for f in dataclasses.fields(GpuSample)]
    assert fields == ["index", "uuid", "name", *gpu_metrics.NAMES, "processes", "workload"]
    bare = GpuSample(0, "GPU-0", "x")  # a source that knows no metric: every one None
    assert all(getattr(bare, name) is None for name in gpu_metrics.NAMES)


def test_the_frame_parser_reads_every_metric_and_a_steady_gpu_moves_only_its_readings():
    frame = {"index": 3, "uuid": "GPU-3", "name": "NVIDIA H200", "processes": [{"pid": 42, "mem_used_mib": 10.0}],
             **VALUES}
    assert parse_gpu(frame) == sample()
    cache = FactCache()

    def parsed(gpu: dict) -> GpuSample:
        return parse_sample({"type": "sample", "t": 1.0, "gpu_source": "nvml", "gpus": [gpu], "procs": []}, cache).gpus[0]

    first = parsed(dict(frame))
    readings = {name: VALUES[name] for name in gpu_metrics.READINGS}
    assert parsed({"index": 3, **readings}) is first  # facts left out, readings unchanged: the same record
    for name in gpu_metrics.READINGS:  # each reading moves on its own; the facts stay the last ones sent
        moved = parsed({"index": 3, **readings, name: 1.5})
        assert moved == dataclasses.replace(first, **{name: 1.5}), name
    left_out = parsed({"index": 3})  # a reading a frame lacks is not measured
    assert all(getattr(left_out, name) is None for name in gpu_metrics.READINGS)
    assert all(getattr(left_out, name) == VALUES[name] for name in gpu_metrics.FACTS)


def store_with(gpu: GpuSample) -> Store:
    store = Store(["h"], history=10)
    store.set_state("h", "connected")
    store.apply_sample("h", HostSample(1000.0, "nvml", [gpu], {}))
    return store


def test_status_json_and_the_status_table_show_every_metric():
    snap = store_with(sample()).snapshot(now=1000.5)
    gpu = snap["hosts"][0]["gpus"][0]
    assert {name: gpu[name] for name in gpu_metrics.NAMES} == VALUES
    table = render_status(snap)
    header = next(line for line in table.splitlines() if line.startswith("HOST") and "PIDS" in line)
    row = next(line for line in table.splitlines() if "NVIDIA H200" in line)
    for m in gpu_metrics.METRICS:
        column = m.column or gpu_metrics.BY_NAME[m.of].column
        assert column in header, m.name
        assert f"{VALUES[m.name]:.0f}" in row, m.name
    assert f"{VALUES['mem_clock_mhz']:.0f} MHz" in row


def scrape(gpu: GpuSample) -> dict:
    return {f.name: f for f in GpuwatchCollector(store_with(gpu), None, 60.0, clock=lambda: 1000.5).collect()}


def test_the_export_has_a_family_per_metric_with_a_prometheus_name():
    families = scrape(sample())
    for m in gpu_metrics.METRICS:
        if m.prom is None:
            continue
        name, _help, scale = m.prom
        [series] = families[name].samples
        assert series.labels == {"host": "h", "gpu": "3", "uuid": "GPU-3", "model": "NVIDIA H200"}
        assert series.value == VALUES[m.name] * scale
    assert families["gpuwatch_gpu_memory_clock_hertz"].samples[0].value == VALUES["mem_clock_mhz"] * 1e6
    # an unmeasured metric is no series (not a 0)
    families = scrape(sample(mem_clock_mhz=None))
    assert families["gpuwatch_gpu_memory_clock_hertz"].samples == []


def test_a_recording_row_carries_every_reading_and_its_facts_every_fact():
    gpu = sample()
    row, facts = fmt.gpu_row(gpu), fmt.gpu_facts(gpu)
    assert fmt.gpu_from_row(row, facts, fmt.gpu_columns(fmt.header(["h"], {}, 0.0))) == gpu
    # a recording from a gpuwatch with a metric this one does not know: that column is skipped
    later = (*gpu_metrics.READINGS, "fan_pct")
    assert fmt.gpu_from_row([*row[:-1], 55.0, row[-1]], facts, later) == gpu
    with pytest.raises(ValueError, match="readings"):
        fmt.gpu_from_row(row, facts, gpu_metrics.V1_ROW)


def test_a_recording_row_keeps_each_process_share_where_it_was_read():
    gpu = dataclasses.replace(sample(), processes=(GpuProcess(42, 10.0, 97.0), GpuProcess(43, 2.0, 0.0),
                                                   GpuProcess(44, 1.0)))
    row, facts = fmt.gpu_row(gpu), fmt.gpu_facts(gpu)
    assert row[-1] == [[42, 10.0, 97.0], [43, 2.0, 0.0], [44, 1.0]]  # (an unread share: the old two-field form)
    assert fmt.gpu_from_row(row, facts, fmt.gpu_columns(fmt.header(["h"], {}, 0.0))) == gpu


def test_the_dcgm_feed_maps_every_metric_with_a_dcgm_series():
    fields = dcgm._GpuFields(3, "GPU-3", "NVIDIA H200")
    for m in gpu_metrics.METRICS:
        if m.dcgm:
            fields.values[m.dcgm] = VALUES[m.name]
    fields.values[dcgm.FB_FREE] = 1000.0
    got = fields.sample()
    for m in gpu_metrics.METRICS:
        if m.dcgm:
            assert getattr(got, m.name) == VALUES[m.name], m.name
    assert got.mem_total_mib == VALUES["mem_used_mib"] + 1000.0  # used + free (+ reserved): no series of its own
    assert set(dcgm.SERIES) <= set(dcgm.METRICS) and "DCGM_FI_DEV_MEM_CLOCK" in dcgm.metrics_selector("")

"""Where a GPU's GPM counters were read, the history says what its utilisation hides: a waiting kernel is
100% util with almost no SM activity (figures of the H200 recording in tests/data/gpm-h200)."""

from __future__ import annotations

from gpuwatch_tui.model import GpuSample, HostSample
from gpuwatch_tui.store import Store
from gpuwatch_tui.ui.widgets.history_view import _gpu_label, series_for


def host_with(**gpm) -> object:
    store = Store(["a"], history=10)
    gpu = GpuSample(0, "GPU-0", "NVIDIA H200", util_pct=100.0, mem_used_mib=1024.0, mem_total_mib=143_771.0,
                    power_w=122.0, power_limit_w=700.0, processes=(), **gpm)
    store.apply_sample("a", HostSample(time=1.0, gpu_source="nvml", gpus=[gpu], procs={}))
    return store.hosts["a"]


def test_a_spinning_gpu_shows_its_sm_and_tensor_activity_beside_its_util():
    host = host_with(sm_active_pct=0.76, tensor_active_pct=0.0)
    assert _gpu_label(0, host.gpus[0]).endswith("122 W · SM 1% · tensor 0%")
    assert series_for(host, 0)[0].label == "utilisation 100% · SM 1% · tensor 0%"


def test_without_gpm_the_labels_are_as_before():
    host = host_with()
    assert _gpu_label(0, host.gpus[0]).endswith("122 W")
    assert series_for(host, 0)[0].label == "utilisation 100%"
    assert series_for(host, None)[0].label == "utilisation 100%"  # the host's summary never carries one GPU's GPM

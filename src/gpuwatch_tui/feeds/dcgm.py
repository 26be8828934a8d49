"""dcgm-exporter series (as Prometheus returns them) -> gpuwatch's HostSample / GpuSample. Pure.

dcgm-exporter labels each series with the GPU (`gpu` index, `UUID`, `modelName`, `device`,
`pci_bus_id`), the node (`Hostname`; newer exporters also or instead `hostname`) and, when it can
tell, the workload (`hpc_job` for Slurm, `pod`/`namespace`/`container` on Kubernetes). Values are
in the units of its default counters CSV: percent, MiB, W, C, MHz; DCGM_FI_PROF_* are ratios 0..1.
"""

from __future__ import annotations

import math

from ..model import GpuSample, HostSample
from ..probe import gpu_metrics

GPU_SOURCE = "prometheus"

# The series of each metric the table maps one to one (gpu_metrics: a row's `dcgm`).
SERIES = {m.dcgm: m.name for m in gpu_metrics.METRICS if m.dcgm}
UTIL = gpu_metrics.BY_NAME["util_pct"].dcgm
FB_USED = gpu_metrics.BY_NAME["mem_used_mib"].dcgm
# The total is no series of its own: used + free + reserved.
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
# A profiling-only collector (dcp-metrics) may have no GPU_UTIL: the graphics engine's active ratio
# stands in for it then (0..1, read as a percent).
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

METRICS = tuple(SERIES) + (FB_FREE, FB_RESERVED, GR_ENGINE_ACTIVE)
# The series whose sample timestamps date a host's last scrape: in the default and the DCP CSVs.
SCRAPE_CLOCK_METRIC = FB_USED
HOST_LABELS = ("Hostname", "hostname")
WORKLOAD_LABELS = ("hpc_job", "pod")


def metrics_selector(selector: str) -> str:
    """One selector for every metric gpuwatch reads, narrowed by the source's label matchers."""
    names = "|".join(METRICS)
    extra = f",{selector}" if selector else ""
    return f'{{__name__=~"{names}"{extra}}}'


def host_of(labels: dict) -> str | None:
    for key in HOST_LABELS:
        value = labels.get(key)
        if value:
            return value
    return None


def _number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    # DCGM writes "blank" sentinels (e.g. 9223372036854775794) for a field the GPU does not support.
    if not math.isfinite(value) or abs(value) >= 9.0e15:
        return None
    return value


class _GpuFields:
    __slots__ = ("index", "uuid", "model", "values", "workload")

    def __init__(self, index: int, uuid: str, model: str) -> None:
        self.index = index
        self.uuid = uuid
        self.model = model
        self.values: dict[str, float | None] = {}
        self.workload: str | None = None

    def sample(self) -> GpuSample:
        v = self.values
        used, free = v.get(FB_USED), v.get(FB_FREE)
        total = None
        if used is not None and free is not None:
            total = used + free + (v.get(FB_RESERVED) or 0.0)
        util = v.get(UTIL)
        if util is None and v.get(GR_ENGINE_ACTIVE) is not None:
            util = 100.0 * v[GR_ENGINE_ACTIVE]
        readings = {name: v.get(series) for series, name in SERIES.items()}
        readings.update(util_pct=util, mem_total_mib=total)
        return GpuSample(index=self.index, uuid=self.uuid, name=self.model, workload=self.workload, **readings)


class HostGpus:
    """One host's GPUs at one scrape, filled series by series."""

    __slots__ = ("gpus", "time")

    def __init__(self) -> None:
        self.gpus: dict[int, _GpuFields] = {}
        self.time: float | None = None

    def add(self, labels: dict, value: float | None) -> None:
        try:
            index = int(labels.get("gpu", ""))
        except ValueError:
            return  # not a per-GPU series (an exporter's own metric with a matching name)
        gpu = self.gpus.get(index)
        if gpu is None:
            gpu = self.gpus[index] = _GpuFields(index, labels.get("UUID") or labels.get("uuid") or "",
                                                labels.get("modelName") or "")
        gpu.values[labels.get("__name__", "")] = value
        for key in WORKLOAD_LABELS:
            if labels.get(key):
                gpu.workload = labels[key]
                break

    def sample(self, at: float) -> HostSample:
        gpus = [g.sample() for _, g in sorted(self.gpus.items())]
        return HostSample(time=at, gpu_source=GPU_SOURCE, gpus=gpus, procs={}, procs_known=False)


def latest_by_host(values: list[dict], stamps: list[dict]) -> dict[str, HostGpus]:
    """An instant query's series (`values`) and `timestamp(SCRAPE_CLOCK_METRIC)` (`stamps`) ->
    each host's GPUs, dated by its newest scrape."""
    hosts: dict[str, HostGpus] = {}
    for series in values:
        labels = series.get("metric") or {}
        host = host_of(labels)
        if host is None:
            continue
        gpus = hosts.get(host)
        if gpus is None:
            gpus = hosts[host] = HostGpus()
        gpus.add(labels, _number(series["value"][1]))
    for series in stamps:
        host = host_of(series.get("metric") or {})
        scraped = _number(series["value"][1])
        if host in hosts and scraped is not None:
            current = hosts[host].time
            hosts[host].time = scraped if current is None else max(current, scraped)
    return hosts


def history_by_host(matrix: list[dict]) -> dict[str, list[tuple[float, HostGpus]]]:
    """A range query's series -> each host's GPUs per evaluation step, oldest first."""
    steps: dict[str, dict[float, HostGpus]] = {}
    for series in matrix:
        labels = series.get("metric") or {}
        host = host_of(labels)
        if host is None:
            continue
        per_time = steps.setdefault(host, {})
        for ts, text in series.get("values") or ():
            at = float(ts)
            gpus = per_time.get(at)
            if gpus is None:
                gpus = per_time[at] = HostGpus()
                gpus.time = at
            gpus.add(labels, _number(text))
    return {host: sorted(per_time.items(), key=lambda item: item[0]) for host, per_time in steps.items()}

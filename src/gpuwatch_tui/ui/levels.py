"""Which theme variable colours a measurement or a phase. Pure functions, no Textual."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..probe import gpu_metrics
from ..vocab import ENDED_PHASES, HOST_OK_STATES, HOST_WARN_STATES, PHASE_URGENCY, PHASES  # noqa: F401

if TYPE_CHECKING:
    from ..model import GpuSample
    from ..probe.gpu_metrics import GpuMetric
    from ..views import JobView


def util_level(pct: float | None) -> str:
    if pct is None or pct < 5:
        return "util-idle"
    if pct < 50:
        return "util-low"
    if pct < 85:
        return "util-mid"
    return "util-high"


def mem_level(pct: float | None) -> str:
    if pct is None or pct < 50:
        return "mem-low"
    if pct < 90:
        return "mem-mid"
    return "mem-high"


def temp_level(celsius: float | None) -> str:
    if celsius is None or celsius < 70:
        return "temp-ok"
    if celsius < 83:
        return "temp-warm"
    return "temp-hot"


_RULES = {"util": util_level, "mem": mem_level, "temp": temp_level}


def metric_level(metric: GpuMetric, gpu: GpuSample) -> str:
    """The variable of one GPU metric's value by its level rule (gpu_metrics: `level`); "muted" where the
    rule needs a value it lacks, or the metric has none. `mem` and `load` read it as a percent of its total."""
    value = getattr(gpu, metric.name)
    rule = metric.level
    total_name = gpu_metrics.TOTALS.get(metric.name)
    if rule in ("mem", "load") and total_name is not None:
        total = getattr(gpu, total_name)
        pct = 100.0 * value / total if value is not None and total else None
        if rule == "mem":
            return mem_level(pct)
        return "muted" if value is None else util_level(pct)
    fn = _RULES.get(rule)
    return "muted" if fn is None else fn(value)


def host_level(state: str) -> str:
    if state in HOST_OK_STATES:
        return "host-ok"
    if state in HOST_WARN_STATES:
        return "host-warn"
    return "host-bad"


def job_has_ended(job: JobView) -> bool:
    """Whether a job may be dismissed: its verdict says it ended, or the tracker says none of its
    processes is alive."""
    return job.phase in ENDED_PHASES or not job.alive


def phase_variable(phase: str | None) -> str:
    return f"phase-{phase}" if phase in PHASES else "phase-unknown"


# Used when a theme (for instance one of Textual's own) does not define gpuwatch's variables
# and the packaged dark theme cannot be read either.
FALLBACK_VARIABLES = {
    "util-idle": "grey", "util-low": "teal", "util-mid": "yellow", "util-high": "green",
    "mem-low": "teal", "mem-mid": "yellow", "mem-high": "orange",
    "temp-ok": "green", "temp-warm": "yellow", "temp-hot": "red",
    "host-ok": "green", "host-warn": "yellow", "host-bad": "red",
    **{f"phase-{p}": "grey" for p in PHASES},
    "muted": "grey", "log-match": "yellow", "leftover": "dark_orange", "gpu-shared": "orange",
}

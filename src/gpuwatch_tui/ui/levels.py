"""Which theme variable colours a measurement or a phase. Pure functions, no Textual."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..views import JobView

PHASES = (
    "starting", "loading", "compiling", "training", "evaluating", "checkpointing",
    "silent", "stalled", "crashed", "finished", "unknown",
)
# Worst first: the default sort of the jobs table puts the jobs that need a person on top.
PHASE_URGENCY = {
    "crashed": 0, "stalled": 1, "silent": 2, "unknown": 3, "starting": 4, "loading": 5,
    "compiling": 6, "checkpointing": 7, "evaluating": 8, "training": 9, "finished": 10,
}

HOST_OK = {"connected"}
HOST_WARN = {"connecting", "stale", "reconnecting"}


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


def host_level(state: str) -> str:
    if state in HOST_OK:
        return "host-ok"
    if state in HOST_WARN:
        return "host-warn"
    return "host-bad"


ENDED_PHASES = {"finished", "crashed"}


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
    "muted": "grey", "log-match": "yellow",
}

"""gpuwatch's words, defined once: job phases, host states, GPU sources, and how units are written.

The phase engine, the tracker, the store, the headless table and the dashboard all import these,
so a phase or a state cannot be spelled two ways, and a duration reads the same everywhere.
Pure: no I/O, no Textual.
"""

from __future__ import annotations

import math
import re
import time
from functools import lru_cache

from .errors import ConfigError

# ----------------------------------------------------------------------------- job phases
# The contract list (DESIGN.md, README): `status --json` consumers rely on exactly these names.
PHASES = (
    "starting", "loading", "compiling", "training", "evaluating", "checkpointing",
    "silent", "stalled", "crashed", "finished", "unknown",
)
# A job in one of these has no live process left to act on: it may only be dismissed.
ENDED_PHASES = frozenset({"finished", "crashed"})
# Worst first: the default sort of the jobs table puts the jobs that need a person on top.
PHASE_URGENCY = {
    "crashed": 0, "stalled": 1, "silent": 2, "unknown": 3, "starting": 4, "loading": 5,
    "compiling": 6, "checkpointing": 7, "evaluating": 8, "training": 9, "finished": 10,
}
# Phases a log line may announce; the others are the engine's conclusions, never the log's.
LOG_PHASES = ("starting", "loading", "compiling", "training", "evaluating", "checkpointing")

# ----------------------------------------------------------------------------- hosts
# Host connection states; the reason string travels next to the state (HostView.error).
HOST_STATES = (
    "connecting",
    "connected",
    "stale",
    "reconnecting",
    "unreachable",
    "auth-failed",
    "host-key-unknown",
    "host-key-changed",
    "probe-failed",
)
HOST_CONNECTED = "connected"
HOST_UNREACHABLE = "unreachable"
HOST_PROBE_FAILED = "probe-failed"
HOST_OK_STATES = frozenset({HOST_CONNECTED})
HOST_WARN_STATES = frozenset({"connecting", "stale", "reconnecting"})
# A host in one of these will not produce a sample without a person: `status` stops waiting for it.
HOST_TERMINAL_STATES = frozenset({"unreachable", "auth-failed", "host-key-unknown", "host-key-changed",
                                  "probe-failed"})

# Where a host's GPU figures come from (reported), and what a config may ask for ("auto": the best found).
GPU_SOURCES = ("nvml", "nvidia-smi", "none", "prometheus")
# "prometheus" is not a probe's choice: a host gets it from a [[sources]] entry.
GPU_SOURCE_CHOICES = ("auto", "nvml", "nvidia-smi", "none")

# The replay's speed steps (`gpuwatch replay --speed`, the + and - keys).
REPLAY_SPEEDS = (1, 2, 5, 10, 30, 60)

# ----------------------------------------------------------------------------- stall threshold
# A job whose log has been quiet this long, with no other sign of progress, is "stalled".
DEFAULT_STALL_AFTER_S = 300.0

# ----------------------------------------------------------------------------- durations
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_EXPECTED = 'a duration: seconds (e.g. 300) or a string such as "90s", "5m", "1h30m"'


def parse_duration(value: object, file: str = "<config>", key: str = "stall_after") -> float:
    """Seconds from 300, 300.0, "300", "90s", "5m", "1h30m", "1d". Raises ConfigError otherwise."""
    if isinstance(value, bool):  # a bool is an int to Python, never a duration to a person
        raise ConfigError(file, key, _DURATION_EXPECTED, value)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        elif text and re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+", text):
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
        else:
            raise ConfigError(file, key, _DURATION_EXPECTED, value)
    else:
        raise ConfigError(file, key, _DURATION_EXPECTED, value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(file, key, "a duration greater than zero", value)
    return seconds


def fmt_duration(seconds: float | None, unknown: str = "?") -> str:
    """A span in whole seconds, two units at most: "5s", "18m40s", "3h01m", "2d04h".

    Truncates (never rounds up), so 119.6 s reads "1m59s", not "1m60s"."""
    if seconds is None or not math.isfinite(seconds):
        return unknown
    return _whole_duration(int(seconds) if seconds > 0 else 0)


@lru_cache(maxsize=8192)
def _whole_duration(s: int) -> str:
    """fmt_duration of whole seconds, kept: every job's evidence and history texts ask it anew on
    every frame, mostly for the same few values."""
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def fmt_duration_span(seconds: float) -> tuple[float, float]:
    """The spans [low, high) of `seconds` that fmt_duration writes alike: it truncates to whole seconds
    (anything under one reads "0s") and shows seconds under an hour, minutes under a day, hours beyond.
    (low > high where none: not finite.) A text kept for an age ages without being made again inside it."""
    if not math.isfinite(seconds):
        return math.inf, -math.inf
    s = int(seconds) if seconds > 0 else 0
    if s == 0:
        return -math.inf, 1.0
    if s < 3600:
        return float(s), s + 1.0
    unit = 60 if s < 86400 else 3600
    return float(s // unit * unit), (s // unit + 1.0) * unit


def fmt_age(seconds: float | None) -> str:
    """How long ago, for a screen: tenths under 10 s (a fresh sample is "0.4s", not "0s"), then as
    fmt_duration; "-" when unknown (a table cell, where "?" would read as a value)."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    return fmt_duration(seconds, unknown="-")


def fmt_coarse_age(seconds: float | None) -> str:
    """Whole seconds: a healthy host's age does not flicker between 0.2s and 0.9s."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return "<1s"
    return fmt_duration(seconds, unknown="-")


def fmt_utc(t: float) -> str:
    """A moment as the reports, the replay bar and the recording's damage note write it: "2026-12-02 03:10:00 UTC"."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def fmt_clock(seconds: float | None) -> str:
    """A remaining time as a clock, the way progress bars print an ETA: "1:02:03", "12:34"."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


# ----------------------------------------------------------------------------- sizes
# GPU memory comes from the driver in MiB; where it is shown in GiB, this is the divisor.
MIB_PER_GIB = 1024.0
KIB_PER_GIB = 1024.0 * MIB_PER_GIB  # host RAM comes from /proc/meminfo in KiB
def fmt_bytes(n: float | None) -> str:
    """Decimal units (1 KB = 1000 B), as `du --si`, disks and quotas count: "512 B", "1.2 GB".
    GPU memory is not written with this: the driver reports it in MiB and it is shown as such."""
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover (the loop returns at TB)

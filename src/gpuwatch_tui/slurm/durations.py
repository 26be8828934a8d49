"""Slurm's time strings: `[days-]hours:minutes:seconds`, `minutes:seconds`, `UNLIMITED`."""

from __future__ import annotations

import re

_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")
_DAYS_HOURS = re.compile(r"^(\d+)-(\d+)$")


def parse_slurm_duration(text: str | None) -> int | None:
    """Seconds, or None for UNLIMITED / INVALID / N/A / empty. Raises ValueError on anything else."""
    t = (text or "").strip()
    if t in ("", "UNLIMITED", "INVALID", "N/A", "NOT_SET", "Partition_Limit", "None"):
        return None
    m = _TIME.match(t)
    if m:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
        if m.group(2) is None:  # "MM:SS"
            return days * 86400 + minutes * 60 + seconds
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    m = _DAYS_HOURS.match(t)  # "D-HH" (sbatch accepts it; squeue does not print it, be lenient)
    if m:
        return int(m.group(1)) * 86400 + int(m.group(2)) * 3600
    if t.isdigit():  # plain minutes (sbatch's -t 10)
        return int(t) * 60
    raise ValueError(f"not a Slurm time: {text!r}")


def format_slurm_duration(seconds: int | None) -> str:
    """Slurm's own display form: 1-02:03:04, 2:03:04, 3:04; None -> UNLIMITED."""
    if seconds is None:
        return "UNLIMITED"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"

"""Short human texts for numbers: ages, sizes, rates, ETAs. Pure functions."""

from __future__ import annotations

from ..vocab import fmt_age, fmt_bytes, fmt_clock, fmt_coarse_age, fmt_duration
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..views import ProgressView


# Units are written one way across gpuwatch (vocab); these names are what the widgets call.
age = fmt_age
coarse_age = fmt_coarse_age
size = fmt_bytes

ETA_CLOCK_BELOW_S = 10 * 3600  # "9:59:59" fits the jobs table's ETA column; "27:44:31" would be cut


def eta(seconds: float | None) -> str:
    """An ETA as a clock under 10 hours ("1:02:03"), beyond in two units ("10h05m", "1d03h")."""
    if seconds is not None and seconds >= ETA_CLOCK_BELOW_S and seconds != float("inf"):
        return fmt_duration(seconds)
    return fmt_clock(seconds)


def progress(p: ProgressView | None) -> str:
    if p is None or p.step is None:
        return "-"
    step, total = p.step, p.total
    if total:
        return f"{step}/{total} {100 * step / total:.0f}%"
    return str(step)


def rate(p: ProgressView | None) -> str:
    """The unit is the log's own: a full rate ("it/s", "s/it", "tok/s") or a thing ("it")."""
    if p is None or p.rate is None:
        return "-"
    value = p.rate
    unit = p.unit or "it"
    if "/" not in unit:
        unit += "/s"
    if value >= 1e6:
        text = f"{value / 1e6:.1f}M"
    elif value >= 1e4:
        text = f"{value / 1e3:.0f}k"
    elif value >= 100:
        text = f"{value:.0f}"
    else:
        text = f"{value:.1f}"
    return f"{text} {unit}"


def loss(p: ProgressView | None) -> str:
    if p is None or p.loss is None:
        return "-"
    return f"{p.loss:.4g}"


def hosts_by_gpus(job) -> str:
    """A job over several hosts: "2x8" (hosts x GPUs per host), "2x1-2" when hosts differ."""
    per_host: dict[str, set[int]] = {h: set() for h in job.hosts}
    for r in job.ranks:
        per_host.setdefault(r.host, set()).update(r.gpus)
    counts = sorted({len(g) for g in per_host.values()})
    return f"{len(per_host)}x{counts[0] if len(counts) == 1 else f'{counts[0]}-{counts[-1]}'}"


def gpus(indices: tuple[int, ...] | list[int] | None) -> str:
    if not indices:
        return "-"
    ordered = sorted(indices)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(str(i) for i in ordered)

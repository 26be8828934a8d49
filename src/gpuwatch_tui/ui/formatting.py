"""Short human texts for numbers: ages, sizes, rates, ETAs. Pure functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..views import ProgressView


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d{seconds % 86400 // 3600:02.0f}h"


def coarse_age(seconds: float | None) -> str:
    """Whole seconds: a healthy host's age does not flicker between 0.2s and 0.9s."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return "<1s"
    if seconds < 60:
        return f"{int(seconds)}s"
    return age(seconds)


def duration(seconds: float | None) -> str:
    """ETA-style: 1:02:03 / 12:34."""
    if seconds is None:
        return "-"
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


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


def gpus(indices: tuple[int, ...] | list[int] | None) -> str:
    if not indices:
        return "-"
    ordered = sorted(indices)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(str(i) for i in ordered)

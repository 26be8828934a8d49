"""Training progress taken from log lines: step / total, rate, loss, epoch, ETA, with history."""

from __future__ import annotations

import math
import re
from collections import deque
from operator import attrgetter
from bisect import bisect_left
from dataclasses import dataclass, field

from ..quick_init import quick_init

_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([kMGTPEZY]?)\s*$")
# A bar that has not moved for this long no longer holds the display against another bar.
BAR_STALE_S = 30.0
# What is read of the step history: a view's last 100 points (export.PROGRESS_POINTS) and the ETA's
# last ETA_WINDOW_S. The newest DENSE_POINTS are all kept; older ones one per SPARSE_POINT_S, and none
# older than the ETA window. (At 1 line/s, 2000 points a job were ~450 MB for 1024 jobs.)
ETA_WINDOW_S = 600.0
DENSE_POINTS = 120
SPARSE_POINT_S = 10.0


def parse_number(text: str | None) -> float | None:
    """12, 1.5e-3, 250k, 2.00M (tqdm unit_scale), nan/inf."""
    if text is None:
        return None
    text = text.strip()
    if text[-1:].isdigit() and "_" not in text:
        try:  # the common case, a plain number: what the pattern below accepts, float() reads alike
            return float(text)
        except ValueError:
            pass
    if text.lower() in ("nan", "inf", "-inf", "+inf"):
        return float(text.lower())
    m = _NUMBER.match(text)
    if not m:
        return None
    return float(m.group(1)) * _SI[m.group(2)]


def parse_clock(text: str | None) -> float | None:
    """tqdm's elapsed/remaining: "05:12", "1:02:03", "2d 01:00:00"; "?" -> None."""
    if not text or "?" in text:
        return None
    days = 0.0
    if "d" in text:
        d, _, text = text.partition("d")
        try:
            days = float(d.strip())
        except ValueError:
            return None
    try:
        parts = [float(p) for p in text.strip().split(":")]
    except ValueError:
        return None
    seconds = 0.0
    for p in parts:
        seconds = seconds * 60 + p
    return days * 86400 + seconds


def parse_rate(rate: str | None, unit: str | None) -> tuple[float | None, str | None]:
    """("2.42", "Mtok/s") -> (2420000.0, "tok/s"); ("1.30", "s/it") -> (1.3, "s/it")."""
    value = parse_number(rate)
    if value is None:
        return None, unit
    if unit and unit.endswith("/s") and len(unit) > 3 and unit[0] in "kMGTPEZY" and unit[1:2].isalpha():
        value *= _SI[unit[0]]
        unit = unit[1:]
    return value, unit


def json_number(x: float | None) -> float | int | None:
    """A whole value as an int, others rounded to 6 places; None for a non-finite one."""
    if x is None or not math.isfinite(x):
        return None
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else round(x, 6)


@dataclass
class Progress:
    step: float | None = None
    total: float | None = None
    rate: float | None = None
    unit: str | None = None  # as the log shows it: it/s, s/it, tok/s, samples/s
    loss: float | None = None
    epoch: float | None = None
    epochs: float | None = None
    eta_s: float | None = None
    lr: float | None = None
    desc: str | None = None  # the progress bar's label, when it came from a bar
    updated_at: float | None = None

    def fraction(self) -> float | None:
        if self.step is None or not self.total:
            return None
        return max(0.0, min(1.0, self.step / self.total))

    def to_json(self) -> dict:
        num = json_number
        out = {
            "step": num(self.step),
            "total": num(self.total),
            "rate": num(self.rate),
            "unit": self.unit,
            "loss": num(self.loss),
            "epoch": num(self.epoch),
            "eta_s": num(self.eta_s),
            "epochs": num(self.epochs),
            "lr": num(self.lr),
            "desc": self.desc,
            "updated_at": self.updated_at,
        }
        if self.loss is not None and not math.isfinite(self.loss):
            out["loss_text"] = str(self.loss)  # JSON has no NaN; say it in words
        return out


_point_time = attrgetter("time")  # the bisection key of the step history (a C call, not a lambda)


@quick_init
@dataclass(frozen=True)
class ProgressPoint:
    time: float
    step: float | None
    total: float | None
    loss: float | None
    epoch: float | None
    rate: float | None


@dataclass
class _Bar:
    step: float
    total: float | None
    updated_at: float


@dataclass
class ProgressTracker:
    """Merges progress fields from successive lines; keeps a history of points."""

    max_history: int = 2000
    current: Progress = field(default_factory=Progress)
    history: deque = field(default_factory=lambda: deque(maxlen=2000))
    last_advance_at: float | None = None  # step went up or a new loss was logged
    _bar_key: tuple[str, float | None] | None = None
    _bar: _Bar | None = None

    def __post_init__(self) -> None:
        if self.history.maxlen != self.max_history:
            self.history = deque(self.history, maxlen=self.max_history)

    def update(self, fields: dict[str, str], now: float) -> bool:
        """Merge one line's progress fields. Returns True when the job visibly advanced."""
        if not fields:
            return False
        cur = self.current
        advanced = False
        step = parse_number(fields.get("step"))
        total = parse_number(fields.get("total"))
        is_bar = "desc" in fields or "percent" in fields
        if is_bar and step is not None and not self._bar_accepts(fields.get("desc", "").strip(), step, total, now):
            step = total = None  # another bar (eval loop, nested bar) while the main one runs
            fields = {k: v for k, v in fields.items() if k not in ("rate", "unit", "eta", "percent")}
        if step is not None:
            if cur.step is None or step != cur.step or total != cur.total:
                advanced = advanced or cur.step is None or step > cur.step or total != cur.total
            cur.step = step
            if total is not None:
                cur.total = total
            elif is_bar:
                cur.total = None
            if is_bar:
                cur.desc = fields.get("desc", "").strip() or None
        rate, unit = parse_rate(fields.get("rate"), fields.get("unit"))
        if rate is not None:
            cur.rate, cur.unit = rate, unit
        loss = parse_number(fields.get("loss"))
        if loss is not None:
            advanced = True
            cur.loss = loss
        for name in ("epoch", "epochs", "lr"):
            value = parse_number(fields[name]) if name in fields else None
            if value is not None:
                setattr(cur, name, value)
        cur.updated_at = now
        if advanced:
            self.last_advance_at = now
            self.history.append(ProgressPoint(now, cur.step, cur.total, cur.loss, cur.epoch, cur.rate))
            self._thin(now)
        eta = parse_clock(fields.get("eta")) if "eta" in fields else None
        if eta is not None:
            cur.eta_s = eta
        elif step is not None:
            cur.eta_s = self._estimate_eta(now, is_bar)
        return advanced

    def _thin(self, now: float) -> None:
        """The point that just left the dense tail goes if it is closer than SPARSE_POINT_S to the one
        kept before it; points past the ETA window go (never the dense tail)."""
        history = self.history
        i = len(history) - DENSE_POINTS - 1
        if i >= 1 and history[i].time - history[i - 1].time < SPARSE_POINT_S:
            del history[i]
        while len(history) > DENSE_POINTS and now - history[0].time > ETA_WINDOW_S:
            history.popleft()

    def _bar_accepts(self, desc: str, step: float, total: float | None, now: float) -> bool:
        key = (desc, total)
        bar = self._bar
        accept = (
            bar is None
            or key == self._bar_key
            or now - bar.updated_at > BAR_STALE_S
            or (bar.total is not None and bar.step >= bar.total)
            or (total is not None and bar.total is not None and total > bar.total)
        )
        if accept:
            self._bar_key = key
            self._bar = _Bar(step, total, now)
        return accept

    def _estimate_eta(self, now: float, from_bar: bool) -> float | None:
        cur = self.current
        if cur.step is None or cur.total is None or cur.total <= cur.step:
            return 0.0 if cur.total is not None and cur.step is not None else None
        remaining = cur.total - cur.step
        if cur.rate and cur.unit:
            if cur.unit.startswith("s/"):
                return remaining * cur.rate
            if from_bar:  # a bar's rate counts the bar's own units
                return remaining / cur.rate
        # Otherwise from the step history of the last few minutes.
        # Points come in time order: find the window's ends, don't walk its (up to 2000) points.
        history = self.history
        first = bisect_left(history, now - ETA_WINDOW_S, key=_point_time)
        newest = next((history[i] for i in range(len(history) - 1, first - 1, -1) if history[i].step is not None), None)
        oldest = next((history[i] for i in range(first, len(history)) if history[i].step is not None), None)
        if newest is not None and newest is not oldest and newest.step > oldest.step and newest.time > oldest.time:
            per_s = (newest.step - oldest.step) / (newest.time - oldest.time)
            return remaining / per_s
        return None

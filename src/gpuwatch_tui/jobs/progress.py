"""Training progress taken from log lines: step / total, rate, loss, epoch, ETA, with history."""

from __future__ import annotations

import math
import re
from collections import deque
from operator import attrgetter
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple


_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")
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
    if "," in text and _THOUSANDS.match(text):  # "1,234" (the HF Trainer's header)
        return float(text.replace(",", ""))
    m = _NUMBER.match(text)
    if not m:
        return None
    return float(m.group(1)) * _SI[m.group(2)]


def parse_clock(text: str | None) -> float | None:
    """A remaining or elapsed time as logs print it: tqdm's "05:12", "1:02:03", "2d 01:00:00"; Python's
    timedelta "1 day, 5:36:12"; Keras' "12s"; "1h 02m 03s". "?" -> None."""
    if not text or "?" in text:
        return None
    text = text.strip()
    last = text[-1:]
    if last == "s" and text[:-1].isdigit():  # Keras' "12s"
        return float(text[:-1])
    if last in ("s", "m", "h", "d") and ":" not in text:
        return _parse_units(text)
    days = 0.0
    if "d" in text:
        d, _, text = text.partition("d")
        text = text.lstrip("ays,").strip()  # "2d 01:00:00", "1 day, 5:36:12", "3 days, 0:00:01"
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


_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_UNIT_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])")


def _parse_units(text: str) -> float | None:
    """"12s", "3m 5s", "1h02m", "2d 3h": the sum of its parts; None when anything else is in it."""
    parts = _UNIT_PART.findall(text)
    if not parts or _UNIT_PART.sub("", text).strip(" ,"):
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def parse_rate(rate: str | None, unit: str | None) -> tuple[float | None, str | None]:
    """("2.42", "Mtok/s") -> (2420000.0, "tok/s"); ("1.30", "s/it") -> (1.3, "s/it")."""
    return scaled_rate(parse_number(rate), unit)


def scaled_rate(value: float | None, unit: str | None) -> tuple[float | None, str | None]:
    """A rate's value with its unit's SI prefix applied: (2.42, "Mtok/s") -> (2420000.0, "tok/s")."""
    if value is None:
        return None, unit
    if unit and unit.endswith("/s") and len(unit) > 3 and unit[0] in "kMGTPEZY" and unit[1:2].isalpha():
        value *= _SI[unit[0]]
        unit = unit[1:]
    return value, unit


def json_number(x: float | None) -> float | int | None:
    """A whole value as an int, others rounded to 6 places; None for a non-finite one."""
    if x is None:
        return None
    if _EXACT_ABOVE < x < _EXACT_BELOW:  # (NaN fails it: the general way below)
        # y + 1.5 * 2**52 - 1.5 * 2**52 is y rounded to an integer (half to even) for |y| < 2**51: two
        # float additions, cheaper than round(y) (a special-method lookup and an int made)
        if x + 6755399441055744.0 - 6755399441055744.0 == x:  # whole (x rounded to an integer is x)
            return x.__trunc__()  # (int(x), without the type call)
        # round(x, 6) writes x out in decimal and reads it back (~2.5k instructions). The 6-place
        # decimal is n / 1e6, n the integer nearest x * 1e6, unless the exact product lies on a half
        # (a tie to break on x itself) or n is 0 (the sign of a zero): below 1e9 the product's double
        # is within half its spacing (under 1/16) of the exact one and both halves are doubles, so a
        # double strictly inside (n - 1/2, n + 1/2) means the exact product is too. n / 1e6 is then
        # the double nearest that decimal (one correctly rounded division), as round gives.
        scaled = x * 1e6
        n = scaled + 6755399441055744.0 - 6755399441055744.0
        if n and _TIE_LOW < scaled - n < _TIE_MARGIN:
            return n / 1e6
        return round(x, 6)
    if not math.isfinite(x):
        return None
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else round(x, 6)


_EXACT_BELOW = 1e9  # json_number's short way: x * 1e6 under 2**50, where doubles are at most 1/8 apart
_EXACT_ABOVE = -_EXACT_BELOW
_TIE_MARGIN = 0.5  # ... so a product's double strictly within this of an integer rounds to it exactly
_TIE_LOW = -_TIE_MARGIN


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


class LineProgress(NamedTuple):
    """One line's progress fields, parsed: what `ProgressTracker.merge` reads."""

    step: float | None
    total: float | None
    is_bar: bool  # the fields came from a progress bar (a `desc` or `percent` group)
    desc: str  # the bar's label, stripped ("" when none)
    rate: float | None  # SI prefix applied
    unit: str | None
    loss: float | None
    epoch: float | None
    epochs: float | None
    lr: float | None
    eta: float | None  # seconds


def read_fields(fields: dict[str, str]) -> LineProgress:
    """Parse one line's progress fields (the texts of the rules' named groups)."""
    get = fields.get
    rate, unit = parse_rate(get("rate"), get("unit"))
    return LineProgress(
        parse_number(get("step")), parse_number(get("total")), "desc" in fields or "percent" in fields,
        get("desc", "").strip(), rate, unit, parse_number(get("loss")), parse_number(get("epoch")),
        parse_number(get("epochs")), parse_number(get("lr")), parse_clock(get("eta")) if "eta" in fields else None,
    )


class ProgressReader:
    """`read_fields` for every line of one shape (the line with its digits made 0, rules.py), from where
    the rules matched its first line: `spans` maps each field to its (start, end) in the line, or to a
    constant text (a rule's fixed unit). Every line of the shape has its fields at those places, so a
    line is read by slicing, with no dict and no pattern, in one generated expression.

    A field that float() reads as a whole on the first line (no spaces around it, ending in a digit, no
    "_") is read with float() on every line of the shape: float's syntax treats the ASCII digits alike,
    so it reads every line of the shape, and parse_number gives float()'s value for such a text. Other
    fields go through the same parsers as `read_fields`."""

    def __init__(self, spans: dict[str, tuple[int, int] | str], sample: str) -> None:
        self.spans = dict(spans)
        names: dict[str, object] = {
            "LineProgress": LineProgress, "_new": tuple.__new__, "_float": float, "_number": parse_number,
            "_clock": parse_clock, "_scaled": scaled_rate,
        }

        def const(value: object) -> str:  # a constant goes in by name: no text is pasted into the code
            name = f"c{len(names)}"
            names[name] = value
            return name

        def text(key: str) -> str | None:
            value = spans.get(key)
            if value is None:
                return None
            if value.__class__ is str:
                return const(value)
            return f"line[{int(value[0])}:{int(value[1])}]"

        def number(key: str) -> str:
            value = spans.get(key)
            if value is None:
                return "None"
            if value.__class__ is str:
                return const(parse_number(value))
            slice_ = text(key)
            return f"_float({slice_})" if _float_reads(sample[value[0]:value[1]]) else f"_number({slice_})"

        unit = text("unit") or "None"
        rate = f"*_scaled({number('rate')}, {unit})" if "rate" in spans else f"None, {unit}"
        fixed_unit = _fixed_text(spans.get("unit"), sample)
        if "rate" in spans and fixed_unit is not None and number("rate").startswith("_float("):
            # The same unit on every line of the shape, the rate never None: its prefix applied here.
            factor, shown = scaled_rate(1.0, fixed_unit)
            scaled = number("rate") if shown == fixed_unit else f"{number('rate')} * {const(factor)}"
            rate = f"{scaled}, {const(shown)}"
        desc = text("desc")
        eta = text("eta")
        parts = [
            number("step"), number("total"), repr("desc" in spans or "percent" in spans),
            f"{desc}.strip()" if desc else "''", rate, number("loss"), number("epoch"), number("epochs"),
            number("lr"), f"_clock({eta})" if eta else "None",
        ]
        # tuple.__new__ straight: the NamedTuple's own __new__ is one more Python call per line.
        self.source = f"lambda line: _new(LineProgress, ({', '.join(parts)}))"
        self.read = eval(self.source, names)  # only ints and names above are in the source


def _fixed_text(value: tuple[int, int] | str | None, sample: str) -> str | None:
    """A field's text when it is the same on every line of the sample's shape: a constant, or a span of
    the sample holding no ASCII digit (the lines of a shape differ only in those)."""
    if value is None or value.__class__ is str:
        return value
    text = sample[value[0]:value[1]]
    return None if any("0" <= c <= "9" for c in text) else text


def _float_reads(text: str) -> bool:
    """Whether parse_number(text) is float(text) on `text` and every text of its shape."""
    if not text or text != text.strip() or not text[-1].isdigit() or "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


_new = tuple.__new__  # a NamedTuple made without its __new__'s Python call
_NO_DIGITS = str.maketrans("", "", "0123456789. \t")  # a bar's words: no numbers, no alignment
_point_time = attrgetter("time")  # the bisection key of the step history (a C call, not a lambda)


class ProgressPoint(NamedTuple):
    """One point of the step history, made for every line that advances: as a tuple, made by one C call
    (`_new`), it costs ~1/5 of a frozen dataclass, which set its fields one by one."""

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
    _bar_desc: str | None = None  # the last bar description seen, and its words (`_bar_accepts`)
    _bar_words: str | None = None

    def __post_init__(self) -> None:
        if self.history.maxlen != self.max_history:
            self.history = deque(self.history, maxlen=self.max_history)

    def update(self, fields: dict[str, str], now: float) -> bool:
        """Merge one line's progress fields. Returns True when the job visibly advanced."""
        if not fields:
            return False
        return self.merge(read_fields(fields), now)

    def merge(self, line: LineProgress, now: float) -> bool:
        """Merge one line's parsed progress (`read_fields`, or a line shape's `ProgressReader`).
        Returns True when the job visibly advanced."""
        cur = self.current
        advanced = False
        step, total, is_bar, desc, rate, unit, loss, epoch, epochs, lr, eta = line
        if is_bar and step is not None and not self._bar_accepts(desc, step, total, now):
            step = total = None  # another bar (eval loop, nested bar) while the main one runs
            rate = eta = None  # its rate, unit and remaining time are that bar's
        if step is not None:
            if cur.step is None or step != cur.step or total != cur.total:
                advanced = advanced or cur.step is None or step > cur.step or total != cur.total
            cur.step = step
            if total is not None:
                cur.total = total
            elif is_bar:
                cur.total = None
            if is_bar:
                cur.desc = desc or None
        elif total is not None and not is_bar:
            cur.total = total  # a header's total ("Total optimization steps = 460") before the first step
        if rate is not None:
            cur.rate, cur.unit = rate, unit
        if loss is not None:
            advanced = True
            cur.loss = loss
        if epoch is not None:
            cur.epoch = epoch
        if epochs is not None:
            cur.epochs = epochs
        if lr is not None:
            cur.lr = lr
        cur.updated_at = now
        if advanced:
            self.last_advance_at = now
            self.history.append(_new(ProgressPoint, (now, cur.step, cur.total, cur.loss, cur.epoch, cur.rate)))
            self._thin(now)
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
        # One bar whatever numbers its description carries (torchtune's "1|31|Loss: 1.19", YOLO's right-
        # aligned loss columns: they change on every frame); bars told apart by their words ("Epoch 3" /
        # "Validation DataLoader 0").
        if desc != self._bar_desc:  # (most frames repeat their bar's words: read them once)
            self._bar_desc, self._bar_words = desc, desc.translate(_NO_DIGITS) if desc else desc
        key = (self._bar_words, total)
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
        step, total = cur.step, cur.total
        if step is None or total is None or total <= step:
            return 0.0 if total is not None and step is not None else None
        remaining = total - step
        rate, unit = cur.rate, cur.unit
        if rate and unit:
            if unit.startswith("s/"):
                return remaining * rate
            if from_bar:  # a bar's rate counts the bar's own units
                return remaining / rate
        # Otherwise from the step history of the last few minutes.
        # Points come in time order: find the window's ends, don't walk its (up to 2000) points.
        history = self.history
        if not history:
            return None
        # Mostly the oldest point kept is in the window (`_thin` drops older ones): no bisection.
        start = now - ETA_WINDOW_S
        first = 0 if history[0].time >= start else bisect_left(history, start, key=_point_time)
        if first == len(history):
            return None
        newest, oldest = history[-1], history[first]  # the window's ends: the usual case, both with a step
        if newest.step is None:
            newest = next((history[i] for i in range(len(history) - 2, first - 1, -1) if history[i].step is not None),
                          None)
        i = first
        if oldest.step is None:
            i = next((k for k in range(first + 1, len(history)) if history[k].step is not None), None)
            oldest = None if i is None else history[i]
        if oldest is not None and i + 1 < len(history) and history[i + 1].time == oldest.time:
            # Lines read in one go share one time (the log's backlog at the first read: a job watched
            # from its step 500 would read as 500 steps in a second). Their steps say nothing of the
            # rate: the window starts at the last of them.
            i = bisect_right(history, oldest.time, key=_point_time) - 1
            while history[i].step is None:
                i -= 1
            oldest = history[i]
        if newest is not None and newest is not oldest and newest.step > oldest.step and newest.time > oldest.time:
            per_s = (newest.step - oldest.step) / (newest.time - oldest.time)
            return remaining / per_s
        return None

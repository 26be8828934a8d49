"""The numbers a view carries: `json_number`'s short way (no decimal round trip for a value that is already
the double nearest a 6-place decimal) answers as `round(x, 6)` does, and a progress point's view made from
the point's tuple equals one made field by field."""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path

import pytest

from gpuwatch_tui.jobs import progress as progress_module
from gpuwatch_tui.jobs.export import _point_view
from gpuwatch_tui.jobs.progress import ProgressPoint, json_number, parse_number
from gpuwatch_tui.views import ProgressPointView, finite_or_none

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"


def reference(x):
    """json_number as it was written before its short way: the definition."""
    if x is None or not math.isfinite(x):
        return None
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else round(x, 6)


def values() -> list:
    rng = random.Random(7)
    out = [None, 0.0, -0.0, 1.0, -3, 7, 2.3992, 3e-4, 89981.1, 1e-7, 5e-7, 4.9999995e-7, -1e-9, -4e-7, 4e-7, -5e-7, 0.1 + 0.2, 2.5e-6,
           1.0000005, 123456.0000005, 999999999.9999995, 1e9 - 0.5, -1e9 + 1e-6, 1e9, 2.0**33 + 0.5, 2.0**40 + 2**-12,
           2.0**53 + 2, 1e300, math.nan, math.inf, -math.inf]
    # Every number the recorded logs hold (losses, rates, learning rates, ETAs as logged).
    for log in sorted(LOGS.glob("*.log")):
        for word in log.read_bytes().decode("utf-8", "replace").replace("=", " ").replace(",", " ").split():
            x = parse_number(word.strip("[]()'\"{}:;%"))
            if x is not None:
                out.append(x)
    for _ in range(8_000):
        k = rng.randint(-9, 12)
        out.append(rng.random() * 10.0**k * rng.choice((1, -1)))
        out.append(round(rng.uniform(-1e5, 1e5), rng.randint(0, 8)))
        out.append(rng.randint(-10**7, 10**7) / 10 ** rng.randint(0, 9))
        out.append((rng.randint(-10**15, 10**15) + 0.5) / 1e6)  # ties at the 7th place
        out.append(struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0])  # any double at all
        out.append(rng.uniform(2.0**32, 2.0**36) + rng.randint(0, 10**6) / 1e6)  # where doubles are coarse
    return out


def mismatches() -> list:
    bad = []
    for x in values():
        got, want = json_number(x), reference(x)
        if repr(got) != repr(want):  # the type (1 and 1.0) and a zero's sign (JSON writes -0.0) too
            bad.append((x, got, want))
    return bad


def test_json_number_answers_as_rounding_to_six_places():
    assert mismatches() == []


@pytest.mark.parametrize("broken", ["no bound", "no tie check"])
def test_the_check_fails_with_the_short_way_broken(broken, monkeypatch):
    if broken == "no bound":  # the short way taken where x * 1e6 is no longer exact within 1/16
        monkeypatch.setattr(progress_module, "_EXACT_BELOW", math.inf)
        monkeypatch.setattr(progress_module, "_EXACT_ABOVE", -math.inf)
    else:  # a product on a half rounded as the double reads (to even), not as x itself lies
        monkeypatch.setattr(progress_module, "_TIE_MARGIN", math.inf)
        monkeypatch.setattr(progress_module, "_TIE_LOW", -math.inf)
    assert mismatches() != []


def test_a_point_view_made_from_the_point_tuple_equals_one_made_field_by_field():
    points = [ProgressPoint(100.0, 3.0, 10.0, 2.5, 0.5, 1.2), ProgressPoint(101.0, None, None, None, None, None),
              ProgressPoint(102.0, 4.0, None, math.nan, None, 3.0), ProgressPoint(103.0, 5.0, 10.0, math.inf, 1.0, None),
              ProgressPoint(104.0, 6.0, 10.0, -math.inf, 1.0, 2.0)]
    for p in points:
        view = _point_view(p)
        want = ProgressPointView(p.time, p.step, p.total, finite_or_none(p.loss), p.epoch)
        assert view == want and type(view) is ProgressPointView, p
        assert view.to_json() == want.to_json() == {"time": p.time, "step": p.step, "total": p.total,
                                                    "loss": finite_or_none(p.loss), "epoch": p.epoch}


def test_a_progress_is_read_whole_in_its_fields_order():
    """The kept view compares a job's progress by these values: every field of Progress, in order."""
    import dataclasses

    from gpuwatch_tui.jobs.export import _progress_values
    from gpuwatch_tui.jobs.progress import Progress

    names = [f.name for f in dataclasses.fields(Progress)]
    progress = Progress(**{name: object() for name in names})
    assert _progress_values(progress) == tuple(getattr(progress, name) for name in names)

"""quick_record: the probe records parsed on every frame are built in one step, and each is the very
record its dataclass-generated __init__ builds: same values, frozen, equal and hashed by value."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from gpuwatch_tui import model
from gpuwatch_tui.quick_record import quick_record

HOT = [model.GpuProcess, model.GpuSample, model.FdTarget, model.ChildProc, model.ProcInfo, model.TailChunk]


def values_of(record) -> list:
    return [getattr(record, f.name) for f in dataclasses.fields(record)]


@pytest.mark.parametrize("cls", HOT, ids=lambda c: c.__name__)
def test_same_record_as_the_generated_init(cls):
    assert "__dataclass_init__" in cls.__dict__ and cls.__slots__  # no per-instance dict
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    args = [object() for _ in required]
    ref = object.__new__(cls)
    cls.__dataclass_init__(ref, *args)
    made = cls(*args)
    assert type(made) is cls and values_of(made) == values_of(ref) and made == ref
    assert values_of(cls(**{f.name: a for f, a in zip(required, args)})) == values_of(ref)
    values = [object() for _ in fields]
    ref = object.__new__(cls)
    cls.__dataclass_init__(ref, *values)
    assert values_of(cls(*values)) == values_of(ref) == values_of(cls(**{f.name: v for f, v in zip(fields, values)}))
    made_by_make = cls.make(*values)
    assert type(made_by_make) is cls and made_by_make == ref and values_of(cls.make(*args)) == values_of(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, 1)
    with pytest.raises((AttributeError, TypeError)):  # (TypeError: CPython 3.11's frozen slotted classes)
        made.not_a_field = 1
    if required:
        with pytest.raises(TypeError):
            cls(*args[:-1])
    with pytest.raises(TypeError):
        cls(*values, object())


def test_equal_hashed_copied_and_replaced_by_value():
    def gpu(util):
        return model.GpuSample(0, "GPU-0", "H200", util, 1.0, 2.0, 40.0, 500.0, 700.0, 1500.0,
                               processes=(model.GpuProcess(7, 1.0),))

    one, two = gpu(90.0), gpu(90.0)
    assert one == two and hash(one) == hash(two) and one != gpu(91.0) and one.workload is None
    assert len({one, two, gpu(91.0)}) == 2
    assert copy.copy(one) == one and copy.deepcopy(one) == one and pickle.loads(pickle.dumps(one)) == one
    moved = dataclasses.replace(one, util_pct=5.0)
    assert type(moved) is model.GpuSample and moved.util_pct == 5.0 and one.util_pct == 90.0
    assert model.ChildProc(3, "x") != model.GpuProcess(3, "x")  # another class never equals it
    proc = model.ProcInfo(5, 1, 10.0, "python", ("python",), None, "S", 1.0, 0.0, 1, 1, 1, 1, (), None, None,
                          False, "", True)
    assert proc.key == (5, 10.0) and proc.dist == () and proc.compilers_seen == ()


def test_defaults_factories_and_refusals():
    @quick_record
    @dataclasses.dataclass(frozen=True, slots=True)
    class Plain:
        a: int
        b: tuple = ()
        c: list = dataclasses.field(default_factory=list)

    one, two = Plain(1), Plain(1)
    assert one == two and one.c == [] and one.c is not two.c and Plain(1, (2,), [3]).c == [3]

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Later:
        a: int

        def __post_init__(self):
            pass

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class ByName:
        a: int

    for cls in (NoSlots, Later, ByName):
        with pytest.raises(TypeError):
            quick_record(cls)

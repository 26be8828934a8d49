"""quick_init: the frozen dataclasses made for every job on every frame get an __init__ that fills the
instance at once; every such class builds the very instance its generated __init__ builds."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from gpuwatch_tui.quick_init import quick_init

MODULES = ["gpuwatch_tui.model", "gpuwatch_tui.views", "gpuwatch_tui.jobs.observation", "gpuwatch_tui.jobs.phase",
           "gpuwatch_tui.jobs.hysteresis",
           "gpuwatch_tui.jobs.interpret", "gpuwatch_tui.jobs.progress"]


def quick_classes():
    for name in MODULES:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and obj.__module__ == name and "__dataclass_init__" in obj.__dict__
                    and "__slots__" not in obj.__dict__):  # slotted: quick_record (test_quick_record.py)
                yield obj


def test_the_hot_frame_classes_have_it():
    names = {c.__name__ for c in quick_classes()}
    assert {"JobView", "ProgressView"} <= names, names
    # PhaseHint and ProgressPoint, made per log line, are NamedTuples; the phase engine's per-frame
    # records are slotted instead, cheaper still (jobs/observation.py says why).
    from gpuwatch_tui.jobs.observation import GpuReading, ResourceSample
    from gpuwatch_tui.jobs.verdict import Verdict

    assert all("__slots__" in c.__dict__ for c in (GpuReading, ResourceSample, Verdict))


@pytest.mark.parametrize("cls", list(quick_classes()), ids=lambda c: c.__name__)
def test_same_instance_as_the_generated_init(cls):
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    args = [object() for _ in required]  # stand-ins: the inits store, never read, their values
    ref = object.__new__(cls)
    cls.__dataclass_init__(ref, *args)
    made = cls(*args)
    assert vars(made) == vars(ref) and list(vars(made)) == [f.name for f in fields]
    by_name = cls(**{f.name: a for f, a in zip(required, args)})
    assert vars(by_name) == vars(ref)
    # Every field given, by position, then by name.
    values = [object() for _ in fields]
    ref = object.__new__(cls)
    cls.__dataclass_init__(ref, *values)
    assert vars(cls(*values)) == vars(ref) == vars(cls(**{f.name: v for f, v in zip(fields, values)}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, 1)
    if required:
        with pytest.raises(TypeError):
            cls(*args[:-1])
    with pytest.raises(TypeError):
        cls(*values, object())


def test_defaults_factories_and_what_is_left_alone():
    @quick_init
    @dataclass_frozen
    class Plain:
        a: int
        b: tuple = ()
        c: list = dataclasses.field(default_factory=list)

    one, two = Plain(1), Plain(1)
    assert one == two and one.c == [] and one.c is not two.c and Plain(1, (2,), [3]).c == [3]
    assert "__dataclass_init__" in Plain.__dict__ and hash(Plain(1, (), None)) == hash(Plain(1, (), None))
    assert dataclasses.replace(one, a=5).a == 5 and one.a == 1

    @quick_init
    @dataclass_frozen
    class Later:
        a: int

        def __post_init__(self):
            object.__setattr__(self, "a", self.a + 1)

    @quick_init
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class ByName:
        a: int

    @quick_init
    @dataclass_frozen
    class Hidden:
        a: int
        b: int = dataclasses.field(default=0, init=False)

    @quick_init
    @dataclass_frozen
    class InitOnly:
        a: int
        scale: dataclasses.InitVar[int] = 1

    for cls in (Later, ByName, Hidden, InitOnly):
        assert "__dataclass_init__" not in cls.__dict__, cls  # the generated __init__ is kept
    assert Later(1).a == 2 and ByName(a=3).a == 3 and Hidden(1).b == 0 and InitOnly(1, 5).a == 1


def dataclass_frozen(cls):
    return dataclasses.dataclass(frozen=True)(cls)


def test_instances_take_no_more_memory_than_with_the_generated_init():
    """The fields are set as the generated __init__ sets them: no per-instance dict is built (in
    CPython that more than doubles a small instance, and for every later instance of the class too).
    The tracker keeps hundreds of thousands of samples and progress points."""
    import tracemalloc

    def point_class():
        @dataclass_frozen
        class Point:  # a fresh class each time: how a class was used before changes its instances' layout
            time: float
            step: float | None
            total: float | None
            loss: float | None
            epoch: float | None
            rate: float | None

        return Point

    sizes = []
    for cls in (quick_init(point_class()), point_class()):
        tracemalloc.start()
        kept = [cls(1.0, 2.0, 100.0, 0.5, None, 3.0) for _ in range(20000)]
        sizes.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        del kept
    quick, generated = sizes
    assert "__dataclass_init__" in vars(cls := quick_init(point_class())) and cls(1, 2, 3, 4, 5, 6).rate == 6
    assert quick <= generated * 1.05, sizes

"""A frozen, slotted dataclass built in one step: for the probe records parsed on every frame.

A frozen dataclass's __init__ sets each field through object.__setattr__ (its own __setattr__
refuses): ~290 ns a field even through quick_init, so a process record of 25 fields cost 7 us, and
gpuwatch parses 8 GPUs, 8 processes and their log tails from every host every second. Into a slotted
class without that guard a field is stored by one specialised instruction. `quick_record` gives a
frozen slotted dataclass a __new__ that fills an instance of a twin class (the same slots, no guard)
and then makes it an instance of the frozen class: `__class__` assignment, which CPython allows
between classes of the same slot layout. The record is the one the generated __init__ makes: frozen,
equal and hashed by value, replaceable, without a per-instance dict (about 8x cheaper to build).
`Record.make(...)`, for the parser's hot paths, builds the same record a further ~25 % cheaper.
"""

from __future__ import annotations

import dataclasses

from .quick_init import init_source

_MISSING = dataclasses.MISSING


def quick_record(cls):
    """Class decorator, applied on top of @dataclass(frozen=True, slots=True)."""
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    if not (cls.__dataclass_params__.frozen and cls.__dict__.get("__slots__") == names
            and all(f.init and not f.kw_only for f in fields) and not hasattr(cls, "__post_init__")):
        raise TypeError(f"quick_record: {cls.__name__} is not a plain frozen slotted dataclass")
    # The twin: the same slots in the same order (so the layouts match), no __setattr__ of its own.
    twin = type(f"_{cls.__name__}Fields", (), {"__slots__": names})
    namespace: dict = {"_MISSING": _MISSING, "_twin": twin}
    signature, body = init_source(fields, namespace, lambda name, value: f"    self.{name} = {value}\n")
    fill = "    self = _twin()\n" + "".join(body)
    source = (f"def __new__(cls, {', '.join(signature)}):\n" + fill + "    self.__class__ = cls\n    return self\n"
              f"def make({', '.join(signature)}):\n" + fill + "    self.__class__ = _cls\n    return self\n")
    namespace["_cls"] = cls
    exec(source, namespace)  # noqa: S102 - built only from the class's own field names, as dataclasses does
    new, make = namespace["__new__"], namespace["make"]
    new.__qualname__ = f"{cls.__qualname__}.__new__"
    make.__qualname__ = f"{cls.__qualname__}.make"
    make.__doc__ = f"{cls.__name__}(...) without the class call's own steps (type.__call__, __new__, __init__)."
    cls.__new__ = new
    cls.make = staticmethod(make)
    cls.__dataclass_init__ = cls.__init__  # kept for the test that compares the two
    cls.__init__ = object.__init__  # the instance is whole when __new__ returns it
    # copy and pickle rebuild it through __new__, with its values.
    cls.__reduce__ = lambda self: (type(self), tuple([getattr(self, n) for n in names]))
    return cls

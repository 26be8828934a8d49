"""A faster __init__ for the frozen dataclasses made for every job on every frame.

A frozen dataclass's generated __init__ sets each field through object.__setattr__ (its own
__setattr__ refuses), looked up anew for every field: a JobView has 35 fields, and the tracker makes
samples, readings, verdicts and views for every job of every host each second. `quick_init` gives
such a class an __init__ with the same signature that calls object.__setattr__ bound once (about
2.3x faster). It does not write the instance's __dict__ (reading it would make CPython build a real
dict per instance: 336 instead of 136 bytes for a 6-field sample, and the tracker keeps hundreds of
thousands). The class stays frozen, equal, hashable and replaceable as before.

Only plain classes are changed: a class with slots, a __post_init__, init-only or keyword-only
fields, or fields left out of __init__ keeps the generated __init__.
"""

from __future__ import annotations

import dataclasses
import inspect

_MISSING = dataclasses.MISSING


def init_source(fields, namespace: dict, store) -> tuple[list[str], list[str]]:
    """The parameters (`name`, `name=default`) and the body lines of an __init__-like function over the
    dataclass `fields`: `store(name, value expression)` writes one field's line; defaults and factories
    go into `namespace` (which must hold `_MISSING`), as the generated __init__ takes them."""
    signature, body = [], []
    for f in fields:
        if f.default is not _MISSING:
            namespace[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
            body.append(store(f.name, f.name))
        elif f.default_factory is not _MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            signature.append(f"{f.name}=_MISSING")
            body.append(store(f.name, f"_factory_{f.name}() if {f.name} is _MISSING else {f.name}"))
        else:
            signature.append(f.name)
            body.append(store(f.name, f.name))
    return signature, body


def quick_init(cls):
    """Class decorator, applied on top of @dataclass(frozen=True)."""
    params = dataclasses.fields(cls)
    generated = cls.__init__
    # The generated __init__ takes exactly the fields, in order, each positional or by name: no
    # init-only (InitVar) or keyword-only parameter, no field left out.
    taken = list(inspect.signature(generated).parameters.values())[1:]
    plain = (
        cls.__dataclass_params__.frozen
        and "__slots__" not in cls.__dict__
        and not hasattr(cls, "__post_init__")
        and [p.name for p in taken] == [f.name for f in params]
        and all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in taken)
    )
    if not plain:
        return cls
    namespace: dict = {"_MISSING": _MISSING, "_set": object.__setattr__}
    signature, body = init_source(params, namespace, lambda name, value: f"    _set(self, {name!r}, {value})\n")
    source = f"def __init__(self, {', '.join(signature)}):\n" + "".join(body or ["    pass\n"])
    exec(source, namespace)  # noqa: S102 - built only from the class's own field names, as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = generated.__doc__
    cls.__init__ = init
    cls.__dataclass_init__ = generated  # kept for the test that compares the two
    return cls

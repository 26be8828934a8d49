"""A package whose names load on first use (PEP 562): importing the package costs nothing until one
of its names is read, so start-up pays only for what the first frame uses."""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable


def lazy_exports(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The package's `__getattr__`: `homes` maps each name to the submodule (".files") defining it."""
    namespace = import_module(package).__dict__

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home, package), name)
        namespace[name] = value  # later reads find it without coming here
        return value

    return load

"""Packs the probe for shipping over a channel, and the one-line bootstrap that unpacks it.

The remote side runs only the bootstrap given on the command line; the probe itself (and the
nvidia-ml-py module when it is installed here) arrives on stdin, so nothing is installed on
the host and nothing from the config is ever part of the program text.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import shlex
import sys
import zlib
from functools import lru_cache
from importlib import resources

# Reads "<length>\n" then that many bytes of zlib'd JSON (the probe and shipped modules), then
# one JSON line of options, then runs the probe with the same stdin left for requests.
BOOTSTRAP = (
    "import sys,zlib,json;"
    "r=sys.stdin.buffer;n=int(r.readline());"
    "b=json.loads(zlib.decompress(r.read(n)));"
    "b['options']=json.loads(r.readline());"
    "exec(compile(b['probe'],'<gpuwatch-probe>','exec'),"
    "{'__name__':'__gpuwatch_probe__','BUNDLE':b})"
)


@lru_cache(maxsize=1)
def probe_source() -> str:
    return resources.files("gpuwatch_tui.probe").joinpath("agent.py").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def probe_modules() -> dict[str, str]:
    """Every module of the probe but agent.py (the wire contract, /proc reading, the GPU sources, the
    dispatcher and its ops_*.py): all small and always shipped, so every host runs the same probe."""
    folder = resources.files("gpuwatch_tui.probe")
    names = sorted(p.name for p in folder.iterdir()
                   if p.name.endswith(".py") and p.name not in ("agent.py", "__init__.py"))
    return {name[:-3]: folder.joinpath(name).read_text(encoding="utf-8") for name in names}


@lru_cache(maxsize=1)
def nvml_modules() -> dict[str, str]:
    """nvidia-ml-py's pynvml is a single stdlib-only file: ship it so hosts need nothing."""
    try:
        import pynvml  # noqa: PLC0415 - optional
    except ImportError:
        return {}
    path = getattr(pynvml, "__file__", None)
    if not path or not path.endswith(".py"):
        return {}
    with open(path, encoding="utf-8") as f:
        return {"pynvml": f.read()}


def shipped_modules(with_nvml: bool = True) -> dict[str, str]:
    """Every module the probe gets along with agent.py, by the name it is imported as there."""
    return {**probe_modules(), **(nvml_modules() if with_nvml else {})}


@lru_cache(maxsize=2)
def _packed_code(with_nvml: bool) -> bytes:
    """The probe (and its modules), compressed once per process (~40 ms of CPU), not per host."""
    body = json.dumps({"probe": probe_source(), "modules": shipped_modules(with_nvml)}).encode()
    packed = zlib.compress(body, 6)
    return str(len(packed)).encode() + b"\n" + packed


def build_payload(options: dict) -> bytes:
    # pynvml is most of the payload: only ship it where the probe may use NVML.
    with_nvml = options.get("gpu_source", "auto") in ("auto", "nvml")
    return _packed_code(with_nvml) + json.dumps(options, separators=(",", ":")).encode() + b"\n"


def remote_command(python: str, prefix: list[str], env: dict[str, str]) -> str:
    """The shell command line that starts the probe; every word is quoted."""
    words = list(prefix)
    if env:
        words.append("env")
        words.extend(f"{k}={v}" for k, v in env.items())
    words += [python, "-c", BOOTSTRAP]
    return " ".join(shlex.quote(w) for w in words)


def local_argv(python: str, env_prefix: list[str] | None = None) -> list[str]:
    return list(env_prefix or []) + [python, "-c", BOOTSTRAP]


class LoadedProbe:
    """The probe loaded in this process as a host loads it (for tests and benchmarks): agent.py's code run
    in a namespace of its own with the shipped modules as its BUNDLE, each imported by plain name through
    the probe's own finder. `ns`: agent.py's globals; `module(name)`: a shipped module as the probe imported
    it. close() takes the finder and the shipped modules out of this process again (and puts back any of the
    same names that were there before), so each load starts afresh."""

    def __init__(self, options: dict | None = None, with_nvml: bool = False) -> None:

        self._sys = sys
        modules = shipped_modules(with_nvml)
        self._names = set(modules) | {"pynvml"}
        self._saved = {name: sys.modules.pop(name) for name in self._names if name in sys.modules}
        self._finders = list(sys.meta_path)
        self.ns = {"__name__": "probe_under_test", "BUNDLE": {"modules": modules, "options": dict(options or {})}}
        exec(compile(probe_source(), "agent.py", "exec"), self.ns)

    def module(self, name: str):

        return importlib.import_module(name)

    def loaded_modules(self) -> list:
        """The shipped modules the probe has imported so far."""
        return [self._sys.modules[name] for name in sorted(self._names) if name in self._sys.modules and
                name != "pynvml"]

    def set_global(self, name: str, value) -> None:
        """Set a global of the whole probe: agent.py's and that of every shipped module it loaded that has one
        by this name (`os`, `time`), as in one namespace of its code."""
        self.ns[name] = value
        for module in self.loaded_modules():
            if name in vars(module):
                setattr(module, name, value)

    def close(self) -> None:
        sys = self._sys
        self._close_descriptors()
        sys.meta_path[:] = [f for f in sys.meta_path if f in self._finders]
        for name in self._names:
            sys.modules.pop(name, None)
        sys.modules.update(self._saved)

    def _close_descriptors(self) -> None:
        """Close what the probe's objects keep open (on a host that lasts until the probe exits; here a test
        process would run out of descriptors over hundreds of loads)."""

        kinds = tuple(getattr(m, kind) for m in self.loaded_modules()
                      for kind in ("KeptFile", "ProcFiles", "PidCursor", "Tail") if kind in vars(m))
        for obj in gc.get_objects():
            if not isinstance(obj, kinds):
                continue
            fds = list(getattr(obj, "fds", {}).values())
            if isinstance(getattr(obj, "fd", None), int):
                fds.append(obj.fd)
                obj.fd = None
            if hasattr(obj, "fds"):
                obj.fds = {}
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

"""Packs the probe for shipping over a channel, and the one-line bootstrap that unpacks it.

The remote side runs only the bootstrap given on the command line; the probe itself (and the
nvidia-ml-py module when it is installed here) arrives on stdin, so nothing is installed on
the host and nothing from the config is ever part of the program text.
"""

from __future__ import annotations

import json
import shlex
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
def request_modules() -> dict[str, str]:
    """The probe's request side: the dispatcher and every op module (probe/ops_*.py).

    They are small and always shipped, so every host answers the same ops."""
    folder = resources.files("gpuwatch_tui.probe")
    names = ["dispatch.py"] + sorted(
        p.name for p in folder.iterdir() if p.name.startswith("ops_") and p.name.endswith(".py")
    )
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
    return {**request_modules(), **(nvml_modules() if with_nvml else {})}


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

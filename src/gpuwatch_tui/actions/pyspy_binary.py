"""The local py-spy binary that is uploaded to hosts that lack one.

py-spy's Linux wheel installs a static binary as a console script; it runs on any Linux host of
the same machine architecture, so it can be copied over and run there with nothing installed.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gpuwatch_tui.errors import GpuwatchError


class PyspyUnavailable(GpuwatchError):
    """No py-spy here to upload, or the host cannot run ours."""


@dataclass(frozen=True)
class LocalPyspy:
    path: Path
    sha256: str
    size: int
    machine: str  # `uname -m` of this machine: the binary's architecture

    @property
    def cache_name(self) -> str:
        """Its file name in a host's cache dir: versions live side by side, named by content."""
        return f"py-spy-{self.sha256[:16]}"

    def check_runs_on(self, host_machine: str) -> None:
        if host_machine != self.machine:
            raise PyspyUnavailable(
                f"the host is {host_machine} but the local py-spy binary is {self.machine}: "
                f"install py-spy on the host (pip install py-spy) to dump there"
            )


def _candidates() -> list[Path]:
    # the console script next to this interpreter (a venv's bin/), then PATH, then the wheel's RECORD
    found: list[Path] = []
    beside = Path(sys.executable).parent / "py-spy"
    found.append(beside)
    on_path = shutil.which("py-spy")
    if on_path:
        found.append(Path(on_path))
    try:
        # importlib.metadata costs ~10 ms (email, zipfile): only when the wheel's binary is looked for
        from importlib.metadata import PackageNotFoundError, distribution  # noqa: PLC0415

        dist = distribution("py-spy")
        for f in dist.files or ():
            if f.name == "py-spy":
                found.append(Path(str(dist.locate_file(f))).resolve())
    except (ImportError, PackageNotFoundError):
        pass
    return found


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


@lru_cache(maxsize=1)
def local_pyspy() -> LocalPyspy:
    """The installed py-spy binary and its checksum (hashed once per process)."""
    for path in _candidates():
        if path.is_file() and os.access(path, os.X_OK) and _is_elf(path):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            return LocalPyspy(path=path, sha256=digest, size=path.stat().st_size, machine=platform.machine())
    raise PyspyUnavailable("py-spy is not installed here (pip install py-spy): there is no binary to upload")

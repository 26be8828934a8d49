"""Write fake-nvidia-smi scenario files atomically (the fake re-reads them every tick).

Scenario keys (all optional; see tests/data/nvidia-smi/README.md):
  gpus (int, default 1; 0 -> "No devices were found", exit 6), phase ("idle"|"held"|"training"|...),
  per_gpu {"<index>": {"phase", "fields", "uuid", "start_row"}}, fields {field: value} (all GPUs),
  processes [{"gpu", "pid", "used_memory_mib", "name"}] | "recorded", uuid_prefix,
  fail (true | "message"; exit fail_code, default 9), hang (true: print nothing until cleared),
  exit_after_ticks / exit_code / exit_message, start_row, data_dir, recording ("h200").
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Mapping

from .fake_nvidia_smi import DRIVER_FAILURE, gpu_uuid  # noqa: F401  (re-exported)

__all__ = [
    "DRIVER_FAILURE", "gpu_uuid", "write_scenario", "read_scenario", "update_scenario", "ScenarioFile",
    "write_placeholder_recordings",
]


def write_scenario(path: Path | str, scenario: Mapping | None = None, /, **fields) -> Path:
    """Atomically replace the scenario at *path* with ``{**scenario, **fields}``."""
    data = dict(scenario or {})
    data.update(fields)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_scenario(path: Path | str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}


def update_scenario(path: Path | str, **fields) -> dict:
    """Shallow-merge *fields* into the scenario (None deletes a key); returns the new scenario."""
    data = read_scenario(path)
    for k, v in fields.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    write_scenario(path, data)
    return data


class ScenarioFile:
    """Convenience wrapper around one scenario file."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def read(self) -> dict:
        return read_scenario(self.path)

    def write(self, scenario: Mapping | None = None, /, **fields) -> "ScenarioFile":
        write_scenario(self.path, scenario, **fields)
        return self

    def update(self, **fields) -> dict:
        return update_scenario(self.path, **fields)

    def set_gpu(self, index: int, **fields) -> dict:
        """Merge into per_gpu[str(index)] (e.g. phase="training", fields={...})."""
        data = self.read()
        per = dict(data.get("per_gpu") or {})
        cur = dict(per.get(str(index)) or {})
        cur.update(fields)
        per[str(index)] = cur
        data["per_gpu"] = per
        write_scenario(self.path, data)
        return data

    def set_processes(self, processes: list[Mapping] | str) -> dict:
        return self.update(processes=list(processes) if not isinstance(processes, str) else processes)

    def fail(self, message: str | bool = True, code: int = 9) -> dict:
        return self.update(fail=message, fail_code=code)

    def recover(self) -> dict:
        return self.update(fail=None, fail_code=None, hang=None, exit_after_ticks=None)

    def hang(self, on: bool = True) -> dict:
        return self.update(hang=True if on else None)

    def no_gpus(self) -> dict:
        return self.update(gpus=0)

    def uuid(self, index: int) -> str:
        """The UUID the fake reports for GPU *index* under the current scenario
        (only defined when uuid_prefix is set)."""
        prefix = self.read().get("uuid_prefix")
        if not prefix:
            raise ValueError("scenario has no uuid_prefix; UUIDs come from the recording")
        return gpu_uuid(prefix, index)


def write_placeholder_recordings(directory: Path | str, gpus: int = 1) -> Path:
    """Write tiny SYNTHETIC h200-{idle,held,training}.{gpu,apps}.csv into *directory*.

    Only for the support code's own tests (pass ``data_dir=directory`` in the scenario).
    Real tests use the recordings from a real H200 in tests/data/nvidia-smi/.
    Values per phase/row are distinct so cycling is observable: utilization.gpu is
    idle 0/0/0, held 0/1/0, training 97/100/99; temperature is 30+row.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    phases = {
        "idle": ([0, 0, 0], [0, 0, 0], 75.0),
        "held": ([0, 1, 0], [520, 520, 520], 118.0),
        "training": ([97, 100, 99], [81234, 81240, 81236], 689.0),
    }
    for phase, (utils, mems, power) in phases.items():
        lines = []
        for row, (u, m) in enumerate(zip(utils, mems)):
            for g in range(gpus):
                lines.append(
                    f"{g}, GPU-00000000-0000-0000-0000-00000000000{g}, NVIDIA H200, {u}, {m}, 143771, "
                    f"{30 + row}, {power + row:.2f}, 700.00, 1980"
                )
        (d / f"h200-{phase}.gpu.csv").write_text("\n".join(lines) + "\n")
        apps = []
        if phase != "idle":
            for g in range(gpus):
                apps.append(f"2026/01/01 00:00:00.000, GPU-00000000-0000-0000-0000-00000000000{g}, {4242 + g}, {mems[0]}")
        (d / f"h200-{phase}.apps.csv").write_text("".join(a + "\n" for a in apps))
    return d

"""Build the stand-in libnvidia-ml.so.1 (fake_nvml.c) with the system C compiler, for the probe's NVML path
on a machine without an NVIDIA driver. The library replays H200 figures; see the C file for what it leaves
out (the driver's own cost per call)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_nvml.c")


def build_fake_nvml(folder: Path) -> Path:
    """Compile the stand-in into `folder`/libnvidia-ml.so.1 and return `folder` (for LD_LIBRARY_PATH).
    Raises RuntimeError naming what is missing when there is no C compiler."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc or gcc) to build the stand-in libnvidia-ml.so.1")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "libnvidia-ml.so.1"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o", str(target), str(SOURCE)], check=True)
    return folder


def fake_nvml_env(folder: Path, gpus: int, pids: list[int], env: dict[str, str] | None = None,
                  pids_file: Path | None = None) -> dict[str, str]:
    """An environment whose NVML is the stand-in in `folder`: `gpus` GPUs, pid i on GPU i % gpus; with
    `pids_file`, the pids are read from it on every sample instead (`write_pids` changes them)."""
    env = dict(os.environ if env is None else env)
    env["LD_LIBRARY_PATH"] = str(folder) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["GPUWATCH_FAKE_NVML_GPUS"] = str(gpus)
    env["GPUWATCH_FAKE_NVML_PIDS"] = ",".join(str(p) for p in pids)
    if pids_file is not None:
        env["GPUWATCH_FAKE_NVML_PIDS_FILE"] = str(pids_file)
    return env


def write_pids(path: Path, pids: list[int]) -> None:
    """The pids the stand-in lists from its next sample on (replaced whole: never read half written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(",".join(str(p) for p in pids))
    os.replace(tmp, path)


GPM_RECORDING = Path(__file__).resolve().parent.parent / "data" / "gpm-h200" / "samples.jsonl"


def gpm_rows(path: Path, plan: dict[int, str], recording: Path = GPM_RECORDING) -> Path:
    """Write the stand-in's GPM replay file (GPUWATCH_FAKE_NVML_GPM): per GPU index, the steady samples of
    one segment of the H200 recording (its first two samples, the segment before and the ramp up, left out)."""
    by_segment: dict[str, list[dict]] = {}
    for line in recording.read_text().splitlines():
        row = json.loads(line)
        if "seg" in row and isinstance(row.get("gpm"), dict) and "sm_util" in row["gpm"]:
            by_segment.setdefault(row["seg"], []).append(row)
    lines = []
    for gpu, segment in plan.items():
        for row in by_segment[segment][2:]:
            g = row["gpm"]
            lines.append(f"{gpu} {row['util']} {row['power_w']} {g['sm_util']} {g['tensor']} {g['dram_bw']}")
    path.write_text("\n".join(lines) + "\n")
    return path

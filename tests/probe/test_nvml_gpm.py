"""The probe's GPM path (gpu_gpm.py) through a real libnvidia-ml.so.1 ABI: the stand-in built from
tests/support/fake_nvml.c replays the GPM figures recorded on an H200 (tests/data/gpm-h200), read through
nvidia-ml-py's own GPM calls as on a host. A busy-wait kernel reads 100% util at ~0.7% SM active; a bf16 matmul
~94% SM and ~91% tensor; the ambiguous GPU (high util, low power) is read first; idle GPUs are not read."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.fake_nvml import fake_nvml_env, gpm_rows

from .test_nvml_direct import nvml_folder  # noqa: F401  (the fixture)

# Run in a child: the library is found through LD_LIBRARY_PATH, read when a process starts. The probe's
# clock is stepped by hand (a read is due every READ_EVERY_S), so the test waits for nothing.
SAMPLES = r"""
import json, sys
import pynvml
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
probe = LoadedProbe()
gpu_nvml, gpu_gpm = probe.module("gpu_nvml"), probe.module("gpu_gpm")
clock = [1000.0]
gpu_nvml.time.monotonic = lambda: clock[0]
source = gpu_nvml.NvmlSource(pynvml)
frames = []
for k in range(int(sys.argv[1])):
    frames.append(source.sample())
    clock[0] += 1.0
print(json.dumps({"frames": frames, "supported": source.gpm.supported if source.gpm else None,
                  "reads": source.gpm.reads if source.gpm else 0, "every": gpu_gpm.READ_EVERY_S}))
"""


def run(nvml_folder, tmp_path, plan, samples, gpus=4):  # noqa: F811
    env = fake_nvml_env(nvml_folder, gpus, [])
    if plan is not None:
        env["GPUWATCH_FAKE_NVML_GPM"] = str(gpm_rows(tmp_path / "gpm.txt", plan))
    out = subprocess.run([sys.executable, "-c", SAMPLES, str(samples)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_spinning_gpu_and_a_working_one_read_as_the_h200_recorded_them(nvml_folder, tmp_path):  # noqa: F811
    got = run(nvml_folder, tmp_path, {0: "spin", 1: "matmul", 2: "idle"}, samples=40)
    assert got["supported"] == [True, True, True, False]
    last = got["frames"][-1]
    spin, matmul, idle, plain = last
    assert spin["util_pct"] == 100 and spin["power_w"] < 130
    assert spin["sm_active_pct"] < 2 and spin["tensor_active_pct"] == 0 and spin["dram_active_pct"] < 1
    assert matmul["util_pct"] >= 95 and matmul["power_w"] > 600
    assert matmul["sm_active_pct"] > 85 and matmul["tensor_active_pct"] > 85 and 5 < matmul["dram_active_pct"] < 30
    for gpu in (idle, plain):  # not read: an idle GPU, and one without GPM
        assert (gpu["sm_active_pct"], gpu["tensor_active_pct"], gpu["dram_active_pct"]) == (None, None, None)


def test_reads_are_spaced_and_the_ambiguous_gpu_comes_first(nvml_folder, tmp_path):  # noqa: F811
    got = run(nvml_folder, tmp_path, {0: "matmul", 1: "matmul", 2: "spin"}, samples=30)
    every = got["every"]
    assert got["reads"] <= 30 / every + 1  # one GPU per READ_EVERY_S, all GPUs together
    frames = got["frames"]
    first_known = {i: next((k for k, f in enumerate(frames) if f[i]["sm_active_pct"] is not None), None)
                   for i in range(3)}
    assert first_known[2] is not None and first_known[2] < min(k for k in (first_known[0], first_known[1])
                                                               if k is not None)


def test_without_a_gpm_capable_gpu_the_keys_are_there_and_none(nvml_folder, tmp_path):  # noqa: F811
    got = run(nvml_folder, tmp_path, None, samples=3)
    assert got["supported"] is None
    for frame in got["frames"]:
        for gpu in frame:
            assert gpu["sm_active_pct"] is None and gpu["tensor_active_pct"] is None


def test_a_gpu_that_goes_idle_loses_the_figures_of_its_busy_time(nvml_folder, tmp_path):  # noqa: F811
    # GPU 0 runs a matmul for its first three GPM reads, then sits idle: its figures must not stay the
    # matmul's (a data-loader-bound job after it read 97% SM at 0% util on an H100 before this was so).
    busy = gpm_rows(tmp_path / "busy.txt", {0: "matmul"}).read_text().splitlines()[:3]
    idle = gpm_rows(tmp_path / "idle.txt", {0: "idle"}).read_text().splitlines()
    rows = tmp_path / "rows.txt"
    rows.write_text("\n".join(busy + idle) + "\n")
    env = fake_nvml_env(nvml_folder, 1, [])
    env["GPUWATCH_FAKE_NVML_GPM"] = str(rows)
    out = subprocess.run([sys.executable, "-c", SAMPLES, "60"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    frames = [f[0] for f in json.loads(out.stdout)["frames"]]
    known = [k for k, g in enumerate(frames) if g["sm_active_pct"] is not None]
    assert known and frames[known[0]]["sm_active_pct"] > 85  # read while it worked
    went_idle = next(k for k, g in enumerate(frames) if g["util_pct"] < 50)
    assert went_idle > known[0]
    for g in frames[went_idle:]:
        assert (g["sm_active_pct"], g["tensor_active_pct"], g["dram_active_pct"]) == (None, None, None), g

"""The probe's NVML readings through the C functions directly (NvmlDirect) equal nvidia-ml-py's own
wrappers' readings: through a real libnvidia-ml.so.1 ABI, the stand-in built from tests/support/fake_nvml.c
(needs a C compiler, as scripts/test.sh installs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.fake_nvml import build_fake_nvml, fake_nvml_env, write_pids

# Run in a child: the library is found through LD_LIBRARY_PATH, read when a process starts.
COMPARE = r"""
import json, sys
import pynvml
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
NvmlSource = LoadedProbe().module("gpu_nvml").NvmlSource
direct, wrapped = NvmlSource(pynvml), NvmlSource(pynvml)
assert direct.direct is not None
wrapped.direct = None
print(json.dumps({"direct": direct.sample(), "wrapped": wrapped.sample(), "again": direct.sample()}))
"""


@pytest.fixture(scope="module")
def nvml_folder(tmp_path_factory):
    return build_fake_nvml(tmp_path_factory.mktemp("nvml"))


def run(nvml_folder, pids, **extra):
    env = fake_nvml_env(nvml_folder, 8, pids)
    env.update(extra)
    out = subprocess.run([sys.executable, "-c", COMPARE], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_direct_readings_equal_the_wrappers_readings(nvml_folder):
    got = run(nvml_folder, [])  # idle GPUs: every figure stays put, so the two reads must be equal
    assert len(got["direct"]) == 8
    assert got["direct"] == got["wrapped"] == got["again"]
    gpu = got["direct"][3]
    assert gpu["util_pct"] == 0 and gpu["temp_c"] == 33 and gpu["sm_clock_mhz"] == 345
    assert gpu["power_w"] == 81.34 and gpu["power_limit_w"] == 700.0
    assert gpu["mem_used_mib"] == 4.0 and gpu["mem_total_mib"] == 143771.0  # v2's figures, through v1
    assert gpu["uuid"].endswith("000000000003") and gpu["name"] == "NVIDIA H200"


def test_busy_gpus_read_their_jobs_and_moving_figures(nvml_folder):
    got = run(nvml_folder, [4242, 4343])
    for key in ("direct", "wrapped"):
        first, second = got[key][0], got[key][1]
        assert first["processes"] == [{"pid": 4242, "mem_used_mib": 70000.0, "sm_pct": None}]
        assert second["processes"] == [{"pid": 4343, "mem_used_mib": 70000.0, "sm_pct": None}]
        assert first["mem_used_mib"] == 70004.0 and 90 <= first["util_pct"] <= 99
        assert 680.0 <= first["power_w"] <= 693.0 and got[key][2]["processes"] == []


def test_a_reading_the_board_does_not_support_is_none_and_the_rest_still_read(nvml_folder):
    got = run(nvml_folder, [], GPUWATCH_FAKE_NVML_NO_POWER="1")
    assert got["direct"] == got["wrapped"]
    assert got["direct"][0]["power_w"] is None and got["direct"][0]["temp_c"] == 33


PIDS_FILE_SAMPLES = r"""
import json, os, sys
import pynvml
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
source = LoadedProbe().module("gpu_nvml").NvmlSource(pynvml)
path = os.environ["GPUWATCH_FAKE_NVML_PIDS_FILE"]
def listed():
    return [[p["pid"] for p in g["processes"]] for g in source.sample()][:2]
first = listed()
with open(path + ".tmp", "w") as f:
    f.write("5151,5252,5353")
os.replace(path + ".tmp", path)
print(json.dumps({"first": first, "then": listed()}))
"""


def test_a_pids_file_lists_pids_that_come_later(nvml_folder, tmp_path):
    """The stand-in's pids file is read on every sample: a test can make a process that started (or outlived
    its parent) after the probe did hold GPU memory."""
    pids = tmp_path / "pids"
    write_pids(pids, [4242])
    env = fake_nvml_env(nvml_folder, 2, [], pids_file=pids)
    out = subprocess.run([sys.executable, "-c", PIDS_FILE_SAMPLES], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["first"] == [[4242], []]
    assert got["then"] == [[5151, 5353], [5252]]

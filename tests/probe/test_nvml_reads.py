"""GPU memory as NVML's v2 call reports it, read through the cheaper v1 call.

No GPU here: a scripted NVML whose v1 used memory counts the driver's reservation and v2 does not, as
on a real H200 (checked there by scripts/gpu_jobs/probe_cost_h200.sh, which prints the probe's numbers
beside nvidia-smi's). The process-list gate has its own test (test_nvml_process_list.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest


RESERVED = 600 << 20
TOTAL = 143771 << 20


class ScriptedNvml:
    """One GPU whose used memory and processes a test sets; every call is counted."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    nvmlMemory_v2 = 0x02000028

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.used_v2 = 1000 << 20
        self.pids = [4242]

    def _count(self, name):
        self.calls.append(name)

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return b"GPU-scripted"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlSystemGetDriverVersion(self):
        return b"580.00"

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000

    def nvmlDeviceGetUtilizationRates(self, h):
        self._count("util")
        return SimpleNamespace(gpu=97)

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        if version:
            self._count("mem_v2")
            return SimpleNamespace(total=TOTAL, used=self.used_v2, reserved=RESERVED)
        self._count("mem_v1")
        return SimpleNamespace(total=TOTAL + RESERVED, used=self.used_v2 + RESERVED)

    def nvmlDeviceGetPowerUsage(self, h):
        return 690000

    def nvmlDeviceGetTemperature(self, h, kind):
        return 55

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._count("procs")
        return [SimpleNamespace(pid=p, usedGpuMemory=500 << 20) for p in self.pids]


@pytest.fixture
def source(probe_loaded):
    nvml = ScriptedNvml()
    return probe_loaded.module("gpu_nvml").NvmlSource(nvml), nvml


def test_memory_reads_as_v2_through_the_cheap_call(source):
    src, nvml = source
    first = src.sample()[0]
    assert first["mem_used_mib"] == 1000.0 and first["mem_total_mib"] == 143771.0
    nvml.calls.clear()
    nvml.used_v2 = 2000 << 20
    later = src.sample()[0]
    assert later["mem_used_mib"] == 2000.0 and later["mem_total_mib"] == 143771.0  # v2's numbers
    assert "mem_v2" not in nvml.calls and nvml.calls.count("mem_v1") == 1


def test_a_frame_owns_its_process_dicts(source):
    src, _ = source
    first = src.sample()[0]["processes"]
    first[0]["pid"] = -1  # a later step of the sample (or a test) changing a frame's dicts
    assert src.sample()[0]["processes"][0]["pid"] == 4242


def test_without_v2_memory_is_v1_as_it_is(source):
    src, nvml = source
    del ScriptedNvml.nvmlMemory_v2  # an older nvidia-ml-py
    try:
        plain = type(src)(ScriptedNvml())
        gpu = plain.sample()[0]
        assert gpu["mem_used_mib"] == 1600.0  # used v1 includes the reservation
    finally:
        ScriptedNvml.nvmlMemory_v2 = 0x02000028

"""The probe's NVML source lists a GPU's compute processes again only when that GPU's memory used changes,
or after PROCS_MAX_AGE_S; between those it reports the list it has. This machine has no GPU: the NVML
stand-in replays samples recorded from a real H200 (benchmarks/results/nvml-vs-smi-h200.json: idle, a
process holding memory, a process training) and counts the calls the source makes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace


RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "nvml-vs-smi-h200.json"
MIB = 1048576


class RecordedNvml:
    """pynvml's calls, answered from one recorded probe sample at a time (`play(i)`)."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    nvmlMemory_v2 = object()

    def __init__(self, samples: list[list[dict]]) -> None:
        self.samples = samples
        self.now = samples[0]
        self.process_calls = 0

    def play(self, i: int) -> None:
        self.now = self.samples[i]

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlSystemGetDriverVersion(self): return b"580.159.03"
    def nvmlDeviceGetCount(self): return len(self.now)
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlDeviceGetUUID(self, h): return self.now[h]["uuid"].encode()
    def nvmlDeviceGetName(self, h): return self.now[h]["name"].encode()
    def nvmlDeviceGetEnforcedPowerLimit(self, h): return int(self.now[h]["power_limit_w"] * 1000)
    def nvmlDeviceGetUtilizationRates(self, h): return SimpleNamespace(gpu=self.now[h]["util_pct"])
    def nvmlDeviceGetPowerUsage(self, h): return int(self.now[h]["power_w"] * 1000)
    def nvmlDeviceGetTemperature(self, h, _kind): return self.now[h]["temp_c"]
    def nvmlDeviceGetClockInfo(self, h, _kind): return self.now[h]["sm_clock_mhz"]

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        g = self.now[h]
        return SimpleNamespace(used=int(g["mem_used_mib"] * MIB), total=int(g["mem_total_mib"] * MIB))

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self.process_calls += 1
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=int(p["mem_used_mib"] * MIB))
                for p in self.now[h]["processes"]]


def recorded() -> tuple[RecordedNvml, dict[str, list[int]]]:
    rows = json.loads(RECORDED.read_text())
    by_phase: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_phase.setdefault(row["phase"], []).append(i)
    return RecordedNvml([row["probe"] for row in rows]), by_phase


def test_the_process_list_follows_memory_changes_and_is_otherwise_kept(monkeypatch, probe_loaded):
    gpu_nvml = probe_loaded.module("gpu_nvml")
    nvml, phases = recorded()
    clock = [1000.0]
    monkeypatch.setattr(gpu_nvml.time, "monotonic", lambda: clock[0])
    source = gpu_nvml.NvmlSource(nvml)
    seen = []
    for i in phases["idle"] + phases["held"] + phases["training"]:
        nvml.play(i)
        clock[0] += 1.0
        seen.append(source.sample())
    gpus = len(nvml.now)
    # Read on the first sample, when a process took memory (held), and when the trainer replaced it:
    # three reads per GPU whose memory changed, not one per sample.
    changes = 1 + sum(1 for a, b in zip(seen, seen[1:]) for g in range(gpus)
                      if a[g]["mem_used_mib"] != b[g]["mem_used_mib"])
    samples = len(seen)
    assert nvml.process_calls < samples * gpus / 2, (nvml.process_calls, samples)
    assert nvml.process_calls >= changes
    # Every sample reports exactly what a fresh read would have: the recorded process list of its moment.
    for i, frame in zip(phases["idle"] + phases["held"] + phases["training"], seen):
        # (one process a GPU: no per-process share read, sm_pct None)
        assert [g["processes"] for g in frame] == [[dict(p, sm_pct=None) for p in g["processes"]]
                                                   for g in nvml.samples[i]]
    held = [f for i, f in zip(phases["idle"] + phases["held"], seen) if i in phases["held"]]
    assert held and held[0][0]["processes"] == [{"pid": 593, "mem_used_mib": 1634.0, "sm_pct": None}]


def test_an_unchanged_list_is_read_again_after_its_age_limit(monkeypatch, probe_loaded):
    gpu_nvml = probe_loaded.module("gpu_nvml")
    nvml, phases = recorded()
    clock = [1000.0]
    monkeypatch.setattr(gpu_nvml.time, "monotonic", lambda: clock[0])
    source = gpu_nvml.NvmlSource(nvml)
    nvml.play(phases["held"][0])
    source.sample()
    first = nvml.process_calls
    clock[0] += gpu_nvml.PROCS_MAX_AGE_S - 0.5
    source.sample()
    assert nvml.process_calls == first  # same memory, young list: kept
    clock[0] += 1.0
    source.sample()
    assert nvml.process_calls == 2 * first  # too old: read again, every GPU
    # A report is a copy: whoever changes a frame's list cannot change the kept one.
    frame = source.sample()
    frame[0]["processes"].append({"pid": 1, "mem_used_mib": 1.0})
    frame[0]["processes"][0]["pid"] = 2
    assert source.sample()[0]["processes"] == [{"pid": 593, "mem_used_mib": 1634.0, "sm_pct": None}]

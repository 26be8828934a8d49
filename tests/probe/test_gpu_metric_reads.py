"""The probe reads each GPU metric the table (gpu_metrics.py) names, through the row's nvidia-smi field or
NVML call, shipped as on a host: the memory clock, which the H200 recordings lack, reads as None ("[N/A]"
from nvidia-smi, NOT_SUPPORTED from NVML) and as its value where the GPU reports one."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from gpuwatch_tui.probe import gpu_metrics
from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv, probe_modules
from tests.support.fake_nvidia_smi import install_fake_nvidia_smi
from tests.support.fake_smi_scenario import ScenarioFile

from .test_nvml_direct import nvml_folder, run  # noqa: F401  (the fixture and the NVML stand-in's runner)


def test_the_metric_table_is_shipped_with_the_probe():
    assert "gpu_metrics" in probe_modules()


class ProbeLines:
    """A real probe started as on a host (bootstrap + bundle on stdin), its JSON lines read with a deadline."""

    def __init__(self, env: dict) -> None:
        self.proc = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env)
        self.proc.stdin.write(build_payload({"interval": 0.2, "gpu_source": "nvidia-smi"}))
        self.proc.stdin.flush()
        self.buf = b""

    def frame_where(self, ok, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                frame = json.loads(line)
                if frame.get("type") == "sample" and ok(frame):
                    return frame
            left = deadline - time.monotonic()
            assert left > 0, "no such frame in time"
            if select.select([self.proc.stdout], [], [], left)[0]:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"the probe exited {self.proc.wait()}"
                self.buf += chunk

    def close(self) -> None:
        self.proc.stdin.close()  # the probe exits when its stdin closes
        try:
            self.proc.wait(15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()


def test_nvidia_smi_fields_the_recording_lacks_are_none_and_set_ones_are_read(tmp_path):
    bindir = tmp_path / "bin"
    install_fake_nvidia_smi(bindir)
    scenario = ScenarioFile(tmp_path / "scenario.json").write(gpus=2, phase="training", uuid_prefix="GPU-m")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", GPUWATCH_FAKE_SMI=str(scenario.path))
    probe = ProbeLines(env)
    try:
        frame = probe.frame_where(lambda f: len(f["gpus"]) == 2)
        for gpu in frame["gpus"]:  # every metric of the table is a key of the frame's GPU
            assert set(gpu_metrics.READINGS) <= set(gpu)
            assert gpu["mem_clock_mhz"] is None  # "[N/A]": not in the recorded CSV
            assert gpu["sm_clock_mhz"] is not None and gpu["temp_c"] is not None
        scenario.update(fields={"clocks.mem": 3201})
        frame = probe.frame_where(lambda f: [g["mem_clock_mhz"] for g in f["gpus"]] == [3201.0, 3201.0])
        assert all(g["util_pct"] is not None for g in frame["gpus"])
    finally:
        probe.close()


@pytest.mark.parametrize("mem_clock", [None, 3201])
def test_nvml_reads_the_memory_clock_through_its_own_clock_constant(nvml_folder, mem_clock):  # noqa: F811
    extra = {} if mem_clock is None else {"GPUWATCH_FAKE_NVML_MEM_CLOCK": str(mem_clock)}
    got = run(nvml_folder, [], **extra)
    assert got["direct"] == got["wrapped"]  # the C path and nvidia-ml-py's wrappers agree
    for gpu in got["direct"]:
        assert gpu["mem_clock_mhz"] == mem_clock
        assert gpu["sm_clock_mhz"] == 345  # the SM clock is still the SM clock's


def test_the_wire_names_every_metric_of_the_table_on_both_sides(probe_loaded):
    """The probe's wire (loaded as a host loads it) and the client's read the same table: every reading is a
    key of a GPU entry, every fact one sent only when it changes (the NVML source reads the facts its own way)."""
    from gpuwatch_tui.probe import wire

    shipped = probe_loaded.module("wire")
    assert shipped is not wire and shipped.GPU_KEYS == wire.GPU_KEYS and shipped.GPU_FACTS == wire.GPU_FACTS
    assert set(gpu_metrics.READINGS) <= set(wire.GPU_KEYS)
    assert wire.GPU_FACTS == ("uuid", "name", *gpu_metrics.FACTS, "processes")

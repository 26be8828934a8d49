"""A GPU that waits told from one that works, by NVML GPM, on the figures recorded on an H200
(tests/data/gpm-h200/summary.json, the medians per segment): a busy-wait kernel (`torch.cuda._sleep`, a rank
spinning in a collective) is `stalled (nccl-spin)` a minute after the log went quiet, with its GPM figures as
evidence; a matmul and a copy loop are never a spin; a small kernel computing at low power (what the power
signal alone would call a spin) is not one when GPM says its SMs work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch_tui.jobs.observation import GpuReading, LogFacts
from gpuwatch_tui.jobs.progress import Progress

from .test_phase import LIMIT, T0, hint, obs, series, verdict_at

SUMMARY = json.loads((Path(__file__).resolve().parent.parent / "data" / "gpm-h200" / "summary.json").read_text())
SEGMENTS = SUMMARY["summary"]


def reading(segment: str, index: int = 0, **override) -> GpuReading:
    s = {**SEGMENTS[segment], **override}
    return GpuReading(index, s["util"], 40_000.0, s["power_w"], LIMIT, s["sm_util"], s["tensor"], s["dram_bw"])


def quiet_job(gpu: GpuReading, quiet: float, cores: float = 1.0, stall: float = 300.0):
    """A job that trained (log lines, no rhythm learnt: few lines) until `quiet` s ago, its GPU reading
    `gpu` since, one rank's core spinning (as a waiting NCCL rank's does)."""
    last = T0 + 120.0
    now = last + quiet
    working = GpuReading(0, 98.0, 40_000.0, 690.0, LIMIT, 94.0, 91.0, 16.0)
    samples = series(T0, now - T0, step=2.0, cores=cores, gpus=lambda t: (working if t <= last else gpu,))
    progress = Progress(step=60.0, total=1000.0, rate=0.5, unit="it/s", updated_at=last)
    log = LogFacts(path="/work/run/train.log", total_bytes=4096, last_growth_at=last, hint=hint("training", T0),
                   progress=progress, last_progress_at=last)
    return obs(samples, log=log, stall=stall), now


def test_a_busy_wait_kernel_is_a_spin_named_within_a_minute_with_its_gpm_figures():
    spin = reading("spin")
    o, now = quiet_job(spin, 50.0)
    assert verdict_at(o, now).phase == "training"
    o, now = quiet_job(spin, 61.0)
    v = verdict_at(o, now)
    assert (v.phase, v.detail) == ("stalled", "nccl-spin"), v
    line = next(e for e in v.evidence if "SM active" in e and "waiting" in e)
    assert line.startswith("GPU0: 100% util but SM active 0.76%, tensor 0%, DRAM 0%, 122 W"), line


@pytest.mark.parametrize("segment", ["matmul", "copy"])
def test_a_gpu_that_works_is_never_a_spin(segment):
    for quiet in (61.0, 200.0, 400.0):
        o, now = quiet_job(reading(segment), quiet)
        v = verdict_at(o, now)
        assert v.detail != "nccl-spin" and v.phase != "stalled", (segment, quiet, v)


def test_a_small_kernel_at_low_power_is_working_when_gpm_says_its_sms_are_busy():
    small = reading("copy", power_w=150.0)  # high util, held-idle power, but the SMs really work
    o, now = quiet_job(small, 400.0)
    v = verdict_at(o, now)
    assert v.phase == "silent" and v.detail != "nccl-spin", v
    # the power signal alone (no GPM: older GPUs, nvidia-smi) still calls the same readings a spin, at the
    # ceiling as before
    no_gpm = GpuReading(0, small.util_pct, small.mem_used_mib, small.power_w, LIMIT)
    o, now = quiet_job(no_gpm, 301.0)
    assert (verdict_at(o, now).phase, verdict_at(o, now).detail) == ("stalled", "nccl-spin")
    o, now = quiet_job(no_gpm, 200.0)
    assert verdict_at(o, now).phase == "training"

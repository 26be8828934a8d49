"""Output captured on real H200s (scripts/capture_gpu.py): CUDA OOM, a device-side assert, and an NCCL
watchdog timeout with nvidia-smi samples of both GPUs during the hang."""

from __future__ import annotations

import csv
from datetime import datetime

from gpuwatch_tui.jobs.interpret import PhaseHint
from gpuwatch_tui.jobs.observation import GpuReading, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import infer_phase

from .helpers import LOGS, find_log, replay


def test_real_cuda_oom():
    _, interp, _ = replay(find_log("cuda-2.11.0-oom"))
    f = interp.failure
    assert f.detail == "oom" and "Tried to allocate 400.00 GiB" in f.summary


def test_real_device_side_assert():
    _, interp, _ = replay(find_log("cuda-2.11.0-device-assert"))
    assert interp.failure.detail == "cuda-error"
    assert "device-side assert triggered" in interp.failure.summary


def test_real_nccl_watchdog_timeout_and_torchrun_root_cause():
    _, interp, _ = replay(find_log("nccl-2.11.0-watchdog-timeout"), chunk=512)
    f = interp.failure
    assert f.detail == "nccl-timeout" and f.rank == 0
    assert "Watchdog caught collective operation timeout" in f.summary
    assert interp.exit_code == -6 and interp.exit_rank == 0  # SIGABRT: the watchdog took rank 0 down


def _smi_samples():
    """nvidia-smi rows (1 s apart, both GPUs) -> ResourceSamples, rank 0 spinning one core in NCCL."""
    rows = list(csv.reader((LOGS / "nccl-2.11.0-watchdog-timeout.smi.csv").open(), skipinitialspace=True))
    by_time: dict[float, list[GpuReading]] = {}
    for row in rows[1:]:
        if len(row) < 7:
            continue
        t = datetime.strptime(row[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        reading = GpuReading(int(row[1]), float(row[2].split()[0]), float(row[5].split()[0]),
                             float(row[3].split()[0]), float(row[4].split()[0]))
        by_time.setdefault(round(t), []).append(reading)
    times = sorted(by_time)
    t0 = times[0]
    return [ResourceSample(time=t, cpu_s=10 + (t - t0), gpus=tuple(by_time[t]), states=("R", "S"),
                           rank_cpu_s=((602, 10 + (t - t0)), (603, 5.0)))
            for t in times], times


def test_real_nccl_hang_numbers_make_nccl_spin():
    samples, times = _smi_samples()
    # The collective started right after step 3 (~04:09:53); the watchdog fired 30 s later. With a
    # 20 s threshold (the watchdog here was set to 30 s), the hang is visible before the watchdog.
    hang_start = next(s.time for s in samples if any(g.index == 0 and g.util_pct == 100 for g in s.gpus))
    now = hang_start + 25
    window = [s for s in samples if s.time <= now]
    log = LogFacts(path="train.log", total_bytes=500, last_growth_at=hang_start,
                   hint=PhaseHint("training", None, "generic-step-of-total", hang_start, hang_start, 9,
                                  "rank 0 step 3/100 loss 0.3333"))
    obs = JobObservation(samples=window, stall_after_s=20, started_at=samples[0].time, log=log, unbuffered=True)
    v = infer_phase(obs, now)
    assert (v.phase, v.detail) == ("stalled", "nccl-spin"), v
    assert any(e.startswith("GPU0 100% util") and "(18% of limit)" in e for e in v.evidence)
    assert any(e.startswith("GPU1 0% util") for e in v.evidence)

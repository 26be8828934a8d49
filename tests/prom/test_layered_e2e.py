"""One host reachable over SSH (a real sshd behind a relay the test controls; GPUs from the nvidia-smi
stand-in, a real training process on GPU 0) that a real Prometheus also has, scraping a stand-in
dcgm-exporter that serves that host's name and the same GPU UUIDs.

SSH up: processes, logs and GPUs come over SSH (gpu_source nvidia-smi). SSH cut: the GPUs keep coming
from Prometheus (gpu_source prometheus), the SSH failure is the hint, and the job is NOT called ended
(Prometheus knows no processes: that is not the job's processes going away). SSH back: SSH again.
Requests go over SSH throughout (and fail with SSH's reason while it is cut).
"""

from __future__ import annotations

import pytest

pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")
pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

import asyncio
import os
import re
import signal
import subprocess
import sys

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.requests import RequestError
from tests.core.helpers import settings_for, wait_for
from tests.faults.fleet import relayed_entry

from .support import RECORDED_DCGM, recorded_dcgm

HOST = "gpu-node-7"
TRAIN = "import time\nfor i in range(1, 10**6):\n    print(f'step {i}/100000 loss=0.5', flush=True)\n    time.sleep(0.3)\n"
ENDED = ("crashed", "finished")


def recorded_uuids() -> dict[str, str]:
    """GPU index -> UUID on the recorded dcgm-exporter page (the stand-in nvidia-smi reports the same)."""
    return dict(re.findall(r'DCGM_FI_DEV_GPU_UTIL\{gpu="(\d+)",UUID="([^"]+)"', RECORDED_DCGM.read_text()))


def start_training(tmp_path) -> int:
    (tmp_path / "train.py").write_text(TRAIN)
    launched = subprocess.run(
        ["sh", "-c", 'nohup "$1" -u train.py > train.log 2>&1 < /dev/null & echo $!', "sh", sys.executable],
        cwd=tmp_path, capture_output=True, text=True, check=True)
    return int(launched.stdout.strip())


def start_ticks(pid: int) -> int:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat): what a ProcessRef names."""
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[19])


async def test_ssh_first_prometheus_while_ssh_is_cut(sshd_factory, ssh_env, relay_factory, prometheus_factory,
                                                    exporter_factory, tmp_path):
    (a,) = sshd_factory(1)
    relay = relay_factory(a)
    uuids = recorded_uuids()
    assert len(uuids) == 8
    exporter = exporter_factory(recorded_dcgm(HOST))
    prom = prometheus_factory([{"job": "dcgm", "address": exporter.address}])
    prom.wait_query(f'count(DCGM_FI_DEV_GPU_UTIL{{Hostname="{HOST}"}})',
                    lambda r: r and float(r[0]["value"][1]) == 8)
    pid = start_training(tmp_path)
    ref = {"pid": pid, "start_ticks": start_ticks(pid)}
    try:
        a.set_scenario(gpus=8, phase="training", per_gpu={i: {"uuid": u} for i, u in uuids.items()},
                       processes=[{"gpu": 0, "pid": pid, "used_memory_mib": 40_000}])
        settings = settings_for(ssh_env, sample_interval=0.5, stale_after=2.0)
        host = dict(relayed_entry(HOST, a, relay, ssh_env), source="dcgm")
        source = {"kind": "prometheus", "name": "dcgm", "url": prom.url, "interval": "1s", "timeout": "2s",
                  "backfill": 0}
        monitor = Monitor(parse_config({"settings": settings, "hosts": [host], "sources": [source]}, "t.toml"))
        rec = monitor.store.hosts[HOST]
        await monitor.start()
        try:
            # -- SSH up: everything from SSH ------------------------------------------------------
            await wait_for(lambda: rec.state == "connected" and rec.gpu_source == "nvidia-smi" and len(rec.gpus) == 8,
                           20, what="connected over SSH with 8 GPUs")

            def job():
                jobs = [j for j in monitor.jobs_json() if j["host"] == HOST and pid in j["pids"]]
                return jobs[0] if jobs else None

            await wait_for(lambda: job() and job()["log"] and job()["phase"] not in ("unknown",), 20,
                           what="the training job found over SSH with its log")
            assert job()["log"] == str(tmp_path / "train.log")
            assert pid in rec.procs  # process facts come over SSH
            assert rec.gpus[0].latest.uuid == uuids["0"]
            # Prometheus is there all along, and its samples are not mixed in while SSH speaks
            await asyncio.sleep(2.5)
            assert rec.gpu_source == "nvidia-smi" and rec.hint is None
            tree = await monitor.request(HOST, "proc_tree", ref)
            assert tree["root"] == pid  # ops go over SSH
            util_points = len(rec.gpus[0].util_history)

            # -- SSH cut: GPUs from Prometheus, the SSH failure as the hint ------------------------
            relay.blackhole()
            await wait_for(lambda: rec.gpu_source == "prometheus", 30, what="GPUs from Prometheus after the cut")
            await wait_for(lambda: rec.state == "connected" and rec.hint, 10, what="Prometheus's state with a hint")
            assert "GPUs from Prometheus while SSH" in rec.hint, rec.hint
            assert len(rec.gpus) == 8 and rec.gpus[0].latest.uuid == uuids["0"]
            # the same GPUs (same UUIDs): their history carries on across the switch
            assert len(rec.gpus[0].util_history) > util_points
            g5 = rec.gpus[5].latest
            assert (g5.util_pct, g5.power_w, g5.workload) == (100, 121.3, "4713")  # the recorded page's figures
            # several Prometheus samples in: the job is still a live job, not "ended" for want of processes
            await asyncio.sleep(4)
            assert rec.gpu_source == "prometheus"
            assert job()["phase"] not in ENDED, job()
            with pytest.raises(RequestError):
                await monitor.request(HOST, "proc_tree", ref, timeout=3)
            snap = {h["name"]: h for h in monitor.snapshot()["hosts"]}[HOST]
            assert snap["gpu_source"] == "prometheus" and 0 <= snap["last_sample_age_s"] < 5

            # -- SSH back: SSH again -------------------------------------------------------------
            relay.pass_through()
            await wait_for(lambda: rec.gpu_source == "nvidia-smi" and rec.state == "connected" and rec.hint is None,
                           30, what="SSH again after the link healed")
            await asyncio.sleep(2.5)
            assert rec.gpu_source == "nvidia-smi" and pid in rec.procs
            assert job()["phase"] not in ENDED, job()
            tree = await monitor.request(HOST, "proc_tree", ref)
            assert tree["root"] == pid
        finally:
            await monitor.stop()
    finally:
        os.kill(pid, signal.SIGKILL)  # the one process this test started

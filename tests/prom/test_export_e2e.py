"""`gpuwatch export` watching real sshd test hosts (GPUs from the nvidia-smi stand-in replaying H200
CSV, a real process on a GPU), scraped by a real Prometheus: the PromQL answers match the store."""

from __future__ import annotations

import pytest

# Dependencies of the package that a venv made before they were added may lack: skip with the reason.
pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")
pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

import asyncio
import subprocess
import sys

import httpx

from gpuwatch_tui.verbs.export import serve_export
from tests.core.helpers import host_entry, make_config

MIB = 1024 * 1024
TRAIN = "import sys, time\nfor i in range(1, 10**6):\n    print(f'step {i}/1000 loss=0.5', flush=True)\n    time.sleep(0.3)\n"


async def test_export_scraped_by_prometheus(sshd_factory, ssh_env, prometheus_factory, tmp_path):
    a, b = sshd_factory(2)
    log = tmp_path / "train.log"
    (tmp_path / "train.py").write_text(TRAIN)
    # A real training-shaped process started the way people do (`nohup python -u train.py > log &`),
    # so it is nobody's child here; the stand-in lists it on GPU 0 of host a.
    launched = subprocess.run(
        ["sh", "-c", 'nohup "$1" -u train.py > train.log 2>&1 < /dev/null & echo $!', "sh", sys.executable],
        cwd=tmp_path, capture_output=True, text=True, check=True)
    pid = int(launched.stdout.strip())
    try:
        a.set_scenario(gpus=2, phase="training", uuid_prefix=f"GPU-{a.name}",
                       processes=[{"gpu": 0, "pid": pid, "used_memory_mib": 40_000}])
        b.set_scenario(gpus=2, phase="idle", uuid_prefix=f"GPU-{b.name}")
        config = make_config(ssh_env, [host_entry(a), host_entry(b)])
        from tests.support.net import free_port

        port = free_port("127.0.0.1")
        stop, started = asyncio.Event(), asyncio.Event()
        export = asyncio.create_task(serve_export(config, "127.0.0.1", port, stop, started))
        await asyncio.wait_for(started.wait(), 15)
        prom = prometheus_factory([{"job": "gpuwatch", "address": f"127.0.0.1:{port}"}])

        async def promql(q: str) -> list[dict]:
            async with httpx.AsyncClient() as client:
                body = (await client.get(f"{prom.url}/api/v1/query", params={"query": q})).json()
            assert body["status"] == "success", body
            return body["data"]["result"]

        async def answer(q: str, pred, timeout: float = 30.0):
            last = None

            async def ok():
                nonlocal last
                last = await promql(q)
                return pred(last)

            deadline = asyncio.get_running_loop().time() + timeout
            while not await ok():
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"{q!r}: last answer {last}")
                await asyncio.sleep(0.3)
            return last

        await answer("sum(gpuwatch_host_up)", lambda r: r and float(r[0]["value"][1]) == 2)
        await answer("count(gpuwatch_gpu_utilization_percent)", lambda r: r and float(r[0]["value"][1]) == 4)
        # attribution: the job's process holds 40000 MiB on GPU 0 of host a, named by its job's id and name
        procs = await answer(f'gpuwatch_job_gpu_memory_bytes{{host="{a.name}",gpu="0"}}',
                             lambda r: r and r[0]["metric"]["job_id"] != "")
        assert float(procs[0]["value"][1]) == 40_000 * MIB and procs[0]["metric"]["job"] == "train.py"
        job_name, job_id = procs[0]["metric"]["job"], procs[0]["metric"]["job_id"]
        # the verdict as a state set: exactly one phase is 1 for the job
        phases = await answer(f'gpuwatch_job_phase{{host="{a.name}",job_id="{job_id}"}} == 1',
                              lambda r: len(r) == 1 and r[0]["metric"]["phase"] in ("training", "starting"))
        info = await answer(f'gpuwatch_job_info{{host="{a.name}",job_id="{job_id}"}}', lambda r: len(r) == 1)
        assert info[0]["metric"]["log"] == str(log) and info[0]["metric"]["job_id"] == job_id
        assert "cmd" not in info[0]["metric"] and "pid" not in procs[0]["metric"]  # bounded label sets
        quiet = await answer(f'gpuwatch_job_seconds_since_log_line{{job_id="{job_id}"}}', lambda r: len(r) == 1)
        assert 0 <= float(quiet[0]["value"][1]) < 10
        # host b's GPU 1: the power the stand-in replays from the H200 recording, with its UUID
        b_power = await promql(f'gpuwatch_gpu_power_watts{{host="{b.name}",gpu="1"}}')
        assert len(b_power) == 1 and 50 < float(b_power[0]["value"][1]) < 800
        assert b_power[0]["metric"]["uuid"].startswith(f"GPU-{b.name}")
        assert phases[0]["metric"]["job"] == job_name

        # a host going down: host_up 0 and its GPU series leave (no stale figures exported)
        b.stop()
        await answer(f'gpuwatch_host_up{{host="{b.name}"}}', lambda r: r and r[0]["value"][1] == "0")
        await answer(f'count(gpuwatch_gpu_power_watts{{host="{b.name}"}}) or vector(0)',
                     lambda r: r and r[0]["value"][1] == "0")
        stop.set()
        await asyncio.wait_for(export, 20)
    finally:
        import os
        import signal

        os.kill(pid, signal.SIGKILL)  # the one process this test started


async def test_export_cli_serves_metrics_for_this_machine(tmp_path):
    from tests.support.net import free_port

    port = free_port("127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch_tui.cli", "export", "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path))
    try:
        async def scraped():
            try:
                async with httpx.AsyncClient() as client:
                    r = await client.get(f"http://127.0.0.1:{port}/metrics")
                return r.status_code == 200 and 'gpuwatch_host_up{host="' in r.text and " 1.0" in r.text and r
            except httpx.HTTPError:
                return False

        r = await wait_for_async(scraped, 20)
        assert r.headers["content-type"].startswith("text/plain; version=")
        assert "gpuwatch_process_cpu_seconds_total" in r.text  # gpuwatch's own cost
    finally:
        proc.terminate()
        assert proc.wait(15) == 0


def test_export_listen_is_checked():
    out = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "export", "--listen", "9808"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "expected HOST:PORT" in out.stderr


def _env(tmp_path):
    import os

    env = dict(os.environ)
    env.pop("GPUWATCH_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path)  # no user hosts.toml: this machine
    return env


async def wait_for_async(pred, timeout: float):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await pred()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.2)


"""gpuwatch reading hosts from a real Prometheus that scrapes stand-in exporters serving the
recorded dcgm-exporter page: PromQL answers first, then what gpuwatch's store holds."""

from __future__ import annotations

import pytest

# Dependencies of the package that a venv made before they were added may lack: skip with the reason.
pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")
pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

import asyncio
import time

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.feeds.prometheus_discovery import with_discovered_hosts
from gpuwatch_tui.monitor import Monitor
from tests.core.helpers import wait_for

from .support import RECORDED_HOST, recorded_dcgm

H200_TOTAL_MIB = 143771


def source_config(url: str, hosts: list[str] | None = None, **source) -> dict:
    entry = {"kind": "prometheus", "name": "dcgm", "url": url, "interval": "1s", "timeout": "2s", "backfill": 5}
    if hosts is not None:
        entry["hosts"] = hosts
    entry.update(source)
    return {"settings": {"sample_interval": 0.5, "stale_after": 1.0}, "sources": [entry]}


@pytest.fixture
def fleet(prometheus_factory, exporter_factory):
    """Two nodes: the recorded one (Hostname label) and a second written by a newer exporter (hostname)."""
    a = exporter_factory(recorded_dcgm())
    b = exporter_factory(recorded_dcgm("dgx-h200-02", hostname_label="hostname"))
    prom = prometheus_factory([{"job": "dcgm", "address": a.address}, {"job": "dcgm2", "address": b.address}])
    prom.wait_query("count(DCGM_FI_DEV_GPU_UTIL)", lambda r: r and float(r[0]["value"][1]) == 16)
    return prom, a, b


async def test_hosts_read_from_prometheus(fleet):
    prom, a, b = fleet
    # What Prometheus holds, asked in PromQL: the recorded page's figures per node.
    assert prom.value(f'sum(DCGM_FI_DEV_FB_USED{{Hostname="{RECORDED_HOST}"}})') == 4 * 71230 + 603 + 68112
    assert prom.value('count(DCGM_FI_DEV_GPU_UTIL{hostname="dgx-h200-02"} == 100)') == 3
    assert prom.value('DCGM_FI_DEV_POWER_USAGE{Hostname="dgx-h200-01",gpu="5"}') == 121.3
    # the NCCL-spin shape (busy at idle power) is in the recorded page, on GPU 5 of each node
    spin = prom.query('DCGM_FI_DEV_GPU_UTIL > 90 and on(UUID, Hostname, hostname) DCGM_FI_DEV_POWER_USAGE < 200')
    assert sorted((s["metric"]["job"], s["metric"]["gpu"], s["metric"]["hpc_job"]) for s in spin) == [
        ("dcgm", "5", "4713"), ("dcgm2", "5", "4713")]

    await asyncio.sleep(3)  # a few scrapes in Prometheus for the start-up backfill to read
    monitor = Monitor(parse_config(source_config(prom.url, [RECORDED_HOST, "dgx-h200-02"]), "t.toml"))
    started = time.monotonic()
    await monitor.start()
    try:
        await wait_for(lambda: all(r.state == "connected" and len(r.gpus) == 8 for r in monitor.store.hosts.values()),
                       15, what="both nodes connected with 8 GPUs")
        first_frame_s = time.monotonic() - started
        snap = monitor.snapshot()
    finally:
        await monitor.stop()
    assert first_frame_s < 10
    hosts = {h["name"]: h for h in snap["hosts"]}
    for name in (RECORDED_HOST, "dgx-h200-02"):
        host = hosts[name]
        assert host["gpu_source"] == "prometheus" and host["error"] is None
        assert 0 <= host["last_sample_age_s"] < 3.5  # the scrape age (1 s scrapes)
        gpus = {g["index"]: g for g in host["gpus"]}
        assert gpus[0]["name"] == "NVIDIA H200" and gpus[0]["uuid"] == "GPU-3f1b6a2e-9c4d-5e7f-8a1b-2c3d4e5f6a70"
        assert (gpus[0]["util_pct"], gpus[0]["power_w"], gpus[0]["sm_clock_mhz"]) == (100, 689.4, 1980)
        assert (gpus[0]["mem_used_mib"], gpus[0]["mem_total_mib"], gpus[0]["temp_c"]) == (71230, H200_TOTAL_MIB, 64)
        assert (gpus[6]["util_pct"], gpus[6]["power_w"], gpus[6]["sm_clock_mhz"]) == (0, 78.1, 345)
        assert gpus[5]["processes"] == []  # Prometheus knows no processes
    rec = monitor.store.hosts[RECORDED_HOST]
    assert rec.gpus[0].latest.workload == "4711" and rec.gpus[6].latest.workload is None
    # the backfill gave the grid history at once (a range query, one point per interval) before the live point
    assert len(rec.gpus[0].util_history) >= 3 and set(rec.gpus[0].power_history) == {689.4}


async def test_exporter_going_away_turns_the_host_stale_then_back(fleet):
    prom, a, b = fleet
    monitor = Monitor(parse_config(source_config(prom.url, [RECORDED_HOST, "dgx-h200-02"], backfill=0), "t.toml"))
    await monitor.start()
    try:
        await wait_for(lambda: monitor.store.hosts["dgx-h200-02"].state == "connected", 15, what="connected")
        b.status = 503  # the node's exporter fails: Prometheus marks its series stale
        prom.wait_query('up{job="dcgm2"}', lambda r: r and r[0]["value"][1] == "0")
        await wait_for(lambda: monitor.store.hosts["dgx-h200-02"].state == "stale", 15, what="stale")
        assert "no DCGM series for this host" in monitor.store.hosts["dgx-h200-02"].error
        assert monitor.store.hosts[RECORDED_HOST].state == "connected"  # the other node is fine
        b.status = 200
        await wait_for(lambda: monitor.store.hosts["dgx-h200-02"].state == "connected", 15, what="back")
    finally:
        await monitor.stop()


async def test_hosts_found_in_prometheus_and_a_selector(fleet, tmp_path):
    prom, a, b = fleet
    config = with_discovered_hosts(parse_config(source_config(prom.url), str(tmp_path / "t.toml")))
    assert [h.name for h in config.hosts] == [RECORDED_HOST, "dgx-h200-02"]
    only_b = parse_config(source_config(prom.url, selector='job="dcgm2"'), "t.toml")
    assert [h.name for h in with_discovered_hosts(only_b).hosts] == ["dgx-h200-02"]
    # the selector narrows the live queries too
    monitor = Monitor(with_discovered_hosts(only_b))
    await monitor.start()
    try:
        await wait_for(lambda: monitor.store.hosts["dgx-h200-02"].state == "connected", 15, what="connected")
    finally:
        await monitor.stop()


def test_discovery_failure_is_a_warning_and_a_host_with_the_reason(tmp_path):
    from tests.support.net import free_port

    url = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    config = with_discovered_hosts(parse_config(source_config(url), str(tmp_path / "t.toml")))
    assert [h.name for h in config.hosts] == ["dcgm"]
    assert any("sources[0]: could not list its hosts" in w and "cannot reach Prometheus" in w for w in config.warnings)

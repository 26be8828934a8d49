"""Every way a Prometheus query fails becomes a PromError with the host state and the reason,
against real HTTP servers on loopback (never a crash), and a source's hosts show it."""

from __future__ import annotations

import pytest

# Dependencies of the package that a venv made before they were added may lack: skip with the reason.
pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")
pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

import json

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.feeds.prometheus_api import PromClient, PromError
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.requests import RequestError
from tests.core.helpers import wait_for
from tests.support.net import free_port

BAD_DATA = json.dumps({"status": "error", "errorType": "bad_data",
                       "error": 'invalid parameter "query": 1:1: parse error: unexpected "}"'})
EXECUTION = json.dumps({"status": "error", "errorType": "execution",
                        "error": "query processing would load too many samples into memory"})
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})


@pytest.mark.parametrize("status,body,state,words", [
    (400, BAD_DATA, "probe-failed", ["rejected the query (HTTP 400)", "bad_data", "parse error"]),
    (422, EXECUTION, "probe-failed", ["rejected the query (HTTP 422)", "execution", "too many samples"]),
    (503, "Service Unavailable", "unreachable", ["HTTP 503", "Service Unavailable"]),
    (200, "<html>a proxy login page</html>", "probe-failed", ["not a Prometheus API answer"]),
    (200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}), "probe-failed",
     ["'matrix', expected a vector"]),
])
async def test_http_failures_become_states_with_reasons(http_factory, status, body, state, words):
    server = http_factory(status=status, body=body)
    client = PromClient(server.url, timeout=2)
    try:
        with pytest.raises(PromError) as caught:
            await client.query("up")
    finally:
        await client.aclose()
    assert caught.value.state == state
    for word in words:
        assert word in caught.value.reason
    assert server.url in caught.value.reason


async def test_timeout_and_unreachable(http_factory):
    slow = http_factory(body=EMPTY, delay=3)
    client = PromClient(slow.url, timeout=0.5)
    try:
        with pytest.raises(PromError) as caught:
            await client.query("up")
    finally:
        await client.aclose()
    assert (caught.value.state, "did not answer within 0.5s" in caught.value.reason) == ("unreachable", True)

    closed = f"http://127.0.0.1:{free_port('127.0.0.1')}"  # nothing listens there
    client = PromClient(closed, timeout=2)
    try:
        with pytest.raises(PromError) as caught:
            await client.query("up")
    finally:
        await client.aclose()
    assert caught.value.state == "unreachable" and f"cannot reach Prometheus at {closed}" in caught.value.reason


def _source_config(url: str, hosts: list[str], **source) -> dict:
    return {
        "settings": {"sample_interval": 0.2, "stale_after": 1.0},
        "sources": [{"kind": "prometheus", "url": url, "hosts": hosts, "interval": "0.3s", "timeout": "1s",
                     "backfill": 0, **source}],
    }


@pytest.mark.parametrize("status,body,state,word", [
    (503, "Service Unavailable", "unreachable", "HTTP 503"),
    (400, BAD_DATA, "probe-failed", "bad_data"),
    (200, EMPTY, "unreachable", "has no DCGM series for host 'node-a'"),
])
async def test_source_hosts_show_the_failure_as_their_state(http_factory, status, body, state, word):
    server = http_factory(status=status, body=body)
    monitor = Monitor(parse_config(_source_config(server.url, ["node-a", "node-b"]), "t.toml"))
    await monitor.start()
    try:
        await wait_for(lambda: all(monitor.store.hosts[h].state == state for h in ("node-a", "node-b")), 10,
                       what=f"both hosts {state}")
        assert word in monitor.store.hosts["node-a"].error
        assert monitor.store.hosts["node-a"].gpus == {}
        # one query set per interval for all hosts of the source, not one per host
        polls_before = len(server.requests)
        await wait_for(lambda: len(server.requests) >= polls_before + 2, 5, what="another poll")
        with pytest.raises(RequestError) as caught:
            await monitor.request("node-a", "proc_tree", {"pid": 1})
        assert caught.value.code == "unsupported" and "Prometheus" in caught.value.message
    finally:
        await monitor.stop()
    assert {p.split("?")[0] for p in server.requests} == {"/api/v1/query"}


async def test_a_hung_prometheus_is_a_timeout_state(http_factory):
    server = http_factory(body=EMPTY, delay=5)
    monitor = Monitor(parse_config(_source_config(server.url, ["node-a"], timeout="0.5s"), "t.toml"))
    await monitor.start()
    try:
        await wait_for(lambda: monitor.store.hosts["node-a"].state == "unreachable", 10, what="unreachable")
        assert "did not answer within 0.5s" in monitor.store.hosts["node-a"].error
    finally:
        await monitor.stop()

"""Fixtures for the Prometheus tests: a real Prometheus on 127.0.0.1 (skipped, with the reason, when
the binary is missing) and stand-in HTTP servers, all stopped at teardown."""

from __future__ import annotations

import pytest

from tests.support.services import service_missing

# Each test module skips itself (with the reason) where httpx or prometheus-client is missing: the
# support module, which needs httpx, is imported inside the fixtures.


@pytest.fixture
def prometheus_factory(tmp_path_factory):
    from .support import PrometheusServer, prometheus_unavailable_reason

    reason = prometheus_unavailable_reason()
    if reason:
        service_missing("Prometheus", reason)
    servers = []

    def make(targets: list[dict], scrape_interval: str = "1s") -> PrometheusServer:
        server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets, scrape_interval)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def http_factory():
    from .support import ScriptedHttp

    servers = []

    def make(kind=ScriptedHttp, *args, **kwargs):
        server = kind(*args, **kwargs).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def exporter_factory(http_factory):
    from .support import TextExporter

    return lambda text: http_factory(TextExporter, text)

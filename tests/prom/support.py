"""Real Prometheus for the tests, and small HTTP servers it (or gpuwatch) talks to. Loopback only.

`PrometheusServer` runs Debian's `prometheus` binary with a temp config and data dir on 127.0.0.1
and a free port; it is stopped by its pid. `TextExporter` serves a metrics page (recorded
dcgm-exporter text, rewritten per test) the way an exporter does. `ScriptedHttp` answers every
request with a chosen status and body, or not at all (a hung server), for the error cases.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx

from tests.support.net import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
DATA = Path(__file__).resolve().parent / "data"
RECORDED_DCGM = DATA / "dcgm-exporter-h200.prom"
RECORDED_HOST = "dgx-h200-01"


def prometheus_unavailable_reason() -> str | None:
    if not Path(PROMETHEUS).is_file():
        return "the prometheus binary is not installed (Debian package `prometheus`)"
    return None


class PrometheusServer:
    def __init__(self, workdir: Path, targets: list[dict], scrape_interval: str = "1s") -> None:
        """`targets`: [{"job": name, "address": "127.0.0.1:port", "path": "/metrics"}]."""
        self.workdir = workdir
        self.port = free_port("127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port}"
        lines = ["global:", f"  scrape_interval: {scrape_interval}", f"  scrape_timeout: {scrape_interval}",
                 "scrape_configs:"]
        for t in targets:
            lines += [f"  - job_name: {t['job']}", "    honor_labels: true",
                      f"    metrics_path: {t.get('path', '/metrics')}",
                      "    static_configs:", f"      - targets: ['{t['address']}']"]
        self.config = workdir / "prometheus.yml"
        self.config.write_text("\n".join(lines) + "\n")
        self.log = workdir / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
                 "--storage.tsdb.retention.time=1h"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"prometheus not ready after {timeout}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def query(self, promql: str) -> list[dict]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5).json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_query(self, promql: str, pred, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        result = None
        while time.monotonic() < deadline:
            result = self.query(promql)
            if pred(result):
                return result
            time.sleep(0.25)
        raise AssertionError(f"PromQL {promql!r} did not reach the expected answer in {timeout}s; last: {result}")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class ScriptedHttp:
    """Every GET gets `status` with `body` (JSON text) after `delay` seconds."""

    def __init__(self, status: int = 200, body: str = "", content_type: str = "application/json",
                 delay: float = 0.0) -> None:
        self.status, self.body, self.content_type, self.delay = status, body, content_type, delay
        self.requests: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.requests.append(self.path)
                if owner.delay:
                    time.sleep(owner.delay)
                status, body, ctype = owner.reply(self.path)
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", free_port("127.0.0.1")), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.address = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, path: str) -> tuple[int, str, str]:
        return self.status, self.body, self.content_type

    def start(self) -> ScriptedHttp:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class TextExporter(ScriptedHttp):
    """An exporter serving `text` at /metrics; tests change `text` or `status` while it runs."""

    def __init__(self, text: str) -> None:
        super().__init__(200, text, "text/plain; version=0.0.4")

    def reply(self, path: str) -> tuple[int, str, str]:
        if path.split("?")[0] != "/metrics":
            return 404, "not found", "text/plain"
        return self.status, self.body, self.content_type


def recorded_dcgm(host: str = RECORDED_HOST, hostname_label: str = "Hostname") -> str:
    """The recorded page, as another node (its Hostname) or a newer exporter (`hostname`) would write it."""
    text = RECORDED_DCGM.read_text()
    return text.replace(f'Hostname="{RECORDED_HOST}"', f'{hostname_label}="{host}"')

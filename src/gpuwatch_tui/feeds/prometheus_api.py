"""Prometheus's HTTP query API (/api/v1/query, /api/v1/query_range) over httpx, async.

Every way a query can fail ends as one `PromError` carrying the host state it means and the reason
in words, so a feed shows it on the host instead of raising: a server that cannot be reached, that
times out or is not ready (503) is `unreachable` (tried again next interval); a query the server
rejects (400 bad_data, 422 execution error) is `probe-failed` (a person must fix the selector).
"""

from __future__ import annotations

import httpx

# A Prometheus failure is shown as one of these host states: not answering, or answering with a refusal.
from ..vocab import HOST_PROBE_FAILED, HOST_UNREACHABLE

_ERROR_TEXT_MAX = 300


class PromError(Exception):
    """A query that gave no data: `state` is the host state it means, `reason` says why."""

    def __init__(self, state: str, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


class PromClient:
    """One connection pool to one Prometheus server; results are the API's `result` lists."""

    def __init__(self, url: str, timeout: float, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self._client = httpx.AsyncClient(base_url=url, timeout=timeout, transport=transport,
                                         headers={"Accept": "application/json"})

    async def query(self, promql: str, at: float | None = None) -> list[dict]:
        """An instant query: a vector, [{"metric": {labels}, "value": [ts, "text"]}, ...]."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return await self._get("/api/v1/query", params, "vector")

    async def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        """A range query: a matrix, [{"metric": {labels}, "values": [[ts, "text"], ...]}, ...]."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return await self._get("/api/v1/query_range", params, "matrix")

    async def _get(self, path: str, params: dict, want: str) -> list[dict]:
        where = f"Prometheus at {self.url}"
        try:
            response = await self._client.get(path, params=params)
        except httpx.TimeoutException:
            raise PromError(HOST_UNREACHABLE, f"{where} did not answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise PromError(HOST_UNREACHABLE, f"cannot reach {where}: {exc or type(exc).__name__}") from None
        body = _json_or_none(response)
        if response.status_code != 200:
            detail = _api_error(body) or response.text.strip()[:_ERROR_TEXT_MAX] or response.reason_phrase
            if response.status_code in (400, 422):
                raise PromError(HOST_PROBE_FAILED, f"{where} rejected the query (HTTP {response.status_code}): {detail}")
            raise PromError(HOST_UNREACHABLE, f"{where} answered HTTP {response.status_code}: {detail}")
        if not isinstance(body, dict) or body.get("status") != "success":
            detail = _api_error(body) or "not a Prometheus API answer"
            raise PromError(HOST_PROBE_FAILED, f"{where}: {detail}")
        data = body.get("data") or {}
        if data.get("resultType") != want or not isinstance(data.get("result"), list):
            raise PromError(HOST_PROBE_FAILED, f"{where} answered a {data.get('resultType')!r}, expected a {want}")
        return data["result"]

    async def aclose(self) -> None:
        await self._client.aclose()


def _json_or_none(response: httpx.Response):
    try:
        return response.json()
    except ValueError:
        return None


def _api_error(body) -> str | None:
    """The API's own words: {"status": "error", "errorType": "bad_data", "error": "..."}."""
    if isinstance(body, dict) and body.get("error"):
        kind = body.get("errorType")
        text = str(body["error"])[:_ERROR_TEXT_MAX]
        return f"{kind}: {text}" if kind else text
    return None

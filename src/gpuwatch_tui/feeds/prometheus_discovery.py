"""The hosts of a Prometheus source that names none: the ones Prometheus has DCGM series for, now.

Asked once, by the CLI right after the config is loaded (the store and the feeds are built from the host list).
A source that cannot be asked then still shows up: as one host named after the source, whose
state carries the reason, plus a warning; restart gpuwatch once Prometheus answers.
"""

from __future__ import annotations

import dataclasses

import httpx

from typing import TYPE_CHECKING

from ..config_records import PrometheusSource, add_source_hosts
from .dcgm import HOST_LABELS, SCRAPE_CLOCK_METRIC, host_of

if TYPE_CHECKING:  # the CLI hands in the assembled config, from above this layer
    from ..config import Config


def discovery_query(source: PrometheusSource) -> str:
    extra = f"{{{source.selector}}}" if source.selector else ""
    return f"group by ({', '.join(HOST_LABELS)}) ({SCRAPE_CLOCK_METRIC}{extra})"


def list_hosts(source: PrometheusSource) -> list[str]:
    """Host names in the source, sorted; raises ValueError with the reason when Prometheus cannot say."""
    try:
        response = httpx.get(f"{source.url}/api/v1/query", params={"query": discovery_query(source)},
                             timeout=source.timeout)
    except httpx.TimeoutException:
        raise ValueError(f"Prometheus at {source.url} did not answer within {source.timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach Prometheus at {source.url}: {exc or type(exc).__name__}") from None
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
        detail = (body or {}).get("error") if isinstance(body, dict) else None
        raise ValueError(f"Prometheus at {source.url} answered HTTP {response.status_code}: "
                         f"{detail or response.text.strip()[:200]}")
    names = {host_of(series.get("metric") or {}) for series in body["data"]["result"]}
    names.discard(None)
    return sorted(names)


def with_discovered_hosts(config: Config) -> Config:
    found: list[tuple[PrometheusSource, tuple[str, ...]]] = []
    warnings = list(config.warnings)
    for index, source in enumerate(config.sources):
        if source.hosts:
            continue
        try:
            names = list_hosts(source)
        except ValueError as exc:
            names = []
            warnings.append(f"{config.path}: sources[{index}]: could not list its hosts ({exc}); "
                            f"shown as one host named {source.name!r} until gpuwatch is restarted")
        if not names:
            if not any(w.startswith(f"{config.path}: sources[{index}]:") for w in warnings):
                warnings.append(f"{config.path}: sources[{index}]: Prometheus at {source.url} has no DCGM series "
                                f"(query {discovery_query(source)}); shown as one host named {source.name!r}")
            names = [source.name]
        found.append((source, tuple(names)))
    hosts = add_source_hosts(list(config.hosts), found)
    return dataclasses.replace(config, hosts=tuple(hosts), warnings=tuple(warnings))



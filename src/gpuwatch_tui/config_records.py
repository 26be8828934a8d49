"""The typed config records every layer reads (settings, hosts, jobs, Prometheus sources, export), and
the helpers each wing's table parser shares. `config.py` assembles them with the wings' own tables;
this module imports no wing, so transport, feeds and the wings can read it from below."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

from .vocab import DEFAULT_STALL_AFTER_S


@dataclass(frozen=True)
class Settings:
    sample_interval: float = 1.0
    history: int = 120
    stall_after: float = DEFAULT_STALL_AFTER_S
    tail_lines: int = 500
    connect_timeout: float = 10.0
    keepalive_interval: float = 10.0
    keepalive_count_max: int = 3
    max_concurrent_connects: int = 16
    reconnect_initial_delay: float = 1.0
    reconnect_max_delay: float = 60.0
    stale_after: float = 5.0  # seconds without a frame before a host is called stale
    ssh_config: tuple[str, ...] = ("~/.ssh/config",)
    known_hosts: str = "~/.ssh/known_hosts"
    theme: str = "gpuwatch-dark"
    readonly: bool = False
    record: str | None = None  # a directory: the dashboard keeps hourly recordings there
    record_retention: float = 24 * 3600.0  # recordings older than this are deleted


@dataclass(frozen=True)
class HostConfig:
    name: str
    local: bool = False
    ssh: str | None = None  # alias from ~/.ssh/config, or host / user@host / user@host:port
    host: str | None = None  # resolved host part of `ssh`
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    jump: str | None = None
    prefix: tuple[str, ...] = ()
    python: str = "python3"
    env: tuple[tuple[str, str], ...] = ()
    gpu_source: str = "auto"
    # Where Prometheus has this host's GPUs (a [[sources]] entry): alone, or under SSH (see feeds/layered.py).
    source: PrometheusSource | None = None


@dataclass(frozen=True)
class PrometheusSource:
    """A [[sources]] entry of kind "prometheus": hosts whose GPUs are read from dcgm-exporter series."""

    name: str
    url: str
    selector: str = ""  # extra label matchers, e.g. 'cluster="a",job="dcgm"'
    hosts: tuple[str, ...] = ()  # empty: every host Prometheus has series for (found at start)
    interval: float = 15.0  # seconds between query sets (dcgm-exporter's usual scrape interval)
    timeout: float = 10.0
    backfill: int = 30  # points of history read with query_range at start (0: none)


@dataclass(frozen=True)
class ExportSettings:
    """`gpuwatch export`: how long an ended job stays in /metrics (bounds label cardinality)."""

    ended_job_ttl: float = 600.0


@dataclass(frozen=True)
class JobConfig:
    name: str
    host: str
    match: str | None = None
    pid_file: str | None = None
    logs: tuple[str, ...] = ()
    output_dir: str | None = None
    stall_after: float | None = None


def unknown_key_warning(file: str, key: str, name: str, known: set[str] | tuple[str, ...]) -> str:
    """"unknown key, ignored", with "did you mean `x`?" when a known key is close (a typo)."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.7)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"{file}: {key}: unknown key, ignored{hint}"


def split_ssh_target(target: str) -> tuple[str | None, str, int | None]:
    """'user@host:port' -> (user, host, port). '[::1]:22' works for IPv6."""
    user = None
    if "@" in target:
        user, _, target = target.rpartition("@")
    port = None
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif target.count(":") == 1:
        host, _, p = target.partition(":")
        port = int(p)
    else:
        host = target
    return user or None, host, port


def add_source_hosts(hosts: list[HostConfig],
                     found: list[tuple[PrometheusSource, tuple[str, ...]]]) -> list[HostConfig]:
    """Hosts a source has: a [[hosts]] entry of the same name gets the source under its SSH feed
    (SSH adds processes and logs); any other name becomes a Prometheus-only host."""
    out = list(hosts)
    index = {h.name: i for i, h in enumerate(out)}
    for source, names in found:
        for name in names:
            if name in index:
                host = out[index[name]]
                if host.source is None:
                    out[index[name]] = dataclasses.replace(host, source=source)
            else:
                index[name] = len(out)
                out.append(HostConfig(name=name, source=source))
    return out

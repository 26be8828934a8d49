"""Shared helpers for the core end-to-end tests: configs for real sshd hosts, waiting on a Monitor."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil

from gpuwatch_tui.config import Config, parse_config

# Short timings so a test that waits on reconnects or staleness stays quick.
FAST_SETTINGS = {
    "sample_interval": 0.2,
    "connect_timeout": 3,
    "keepalive_interval": 1,
    "keepalive_count_max": 2,
    "reconnect_initial_delay": 0.1,
    "reconnect_max_delay": 0.5,
    "stale_after": 1.0,
}


def settings_for(ssh_env, **overrides) -> dict:
    s = dict(FAST_SETTINGS)
    s["ssh_config"] = [str(ssh_env.ssh_config)]
    s["known_hosts"] = str(ssh_env.known_hosts)
    s.update(overrides)
    return s


def host_entry(host, **kw) -> dict:
    """A [[hosts]] table for an SshdHost reached through its alias in ssh_env's config."""
    entry = {"name": host.name, "ssh": host.name, "gpu_source": "nvidia-smi"}
    entry.update(kw)
    return entry


def make_config(ssh_env, hosts: list[dict], file: str = "test.toml", **settings) -> Config:
    return parse_config({"settings": settings_for(ssh_env, **settings), "hosts": hosts}, file)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def write_toml(path: Path, settings: dict, hosts: list[dict]) -> Path:
    lines = ["[settings]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    for h in hosts:
        lines += ["", "[[hosts]]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in h.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


async def wait_for(pred, timeout: float, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def host_rec(monitor, name):
    return monitor.store.hosts[name]


def probes_on(host) -> list[psutil.Process]:
    """Live probe processes (python running the bootstrap) started in this test host's sessions."""
    out = []
    for p in host.marked_processes():
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.Error, OSError):
            continue
        if "gpuwatch-probe" in cmd or "zlib.decompress" in cmd:
            out.append(p)
    return out

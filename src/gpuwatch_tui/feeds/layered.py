"""A host both reachable over SSH and present in Prometheus: SSH first, Prometheus underneath.

While the SSH probe is connected it is the host's only voice: its GPU figures come with the
processes on each GPU, and its samples carry the processes and logs the job engine needs.
Prometheus's samples are dropped then. While SSH is down (connecting, unreachable, auth failure...)
the host's GPUs come from Prometheus (gpu_source "prometheus", with the scrape age), the host's state
is Prometheus's, and the SSH failure is shown as the hint. Requests always go over SSH.
"""

from __future__ import annotations

import asyncio

from ..model import HostSample
from ..vocab import HOST_CONNECTED
from .base import DEFAULT_REQUEST_TIMEOUT_S, FeedSink, HostFeed


class _Side:
    """The sink one inner feed reports into: it tells the layered feed which side spoke."""

    def __init__(self, owner: LayeredFeed, side: str) -> None:
        self.owner = owner
        self.side = side

    def host_state(self, host: str, state: str, error: str | None, hint: str | None,
                   retry_at: float | None = None) -> None:
        self.owner._state(self.side, state, error, hint, retry_at)

    def host_sample(self, host: str, sample: HostSample) -> None:
        self.owner._sample(self.side, sample)


class LayeredFeed(HostFeed):
    def __init__(self, name: str, sink: FeedSink, make_ssh, make_prometheus) -> None:
        """`make_ssh(sink)` / `make_prometheus(sink)` build the two inner feeds reporting into `sink`."""
        self.name = name
        self.sink = sink
        self.ssh: HostFeed = make_ssh(_Side(self, "ssh"))
        self.prometheus: HostFeed = make_prometheus(_Side(self, "prometheus"))
        self._last: dict[str, tuple] = {}

    @property
    def state(self) -> str:
        return self.ssh.state if self.ssh.state == HOST_CONNECTED else self.prometheus.state

    def start(self) -> asyncio.Task:
        self.prometheus.start()
        return self.ssh.start()

    async def stop(self) -> None:
        await asyncio.gather(self.ssh.stop(), self.prometheus.stop(), return_exceptions=True)

    async def wants(self, pids: list[int], tails: dict[str, str], dirs: dict[str, str],
                    matches: dict[str, dict]) -> None:
        await self.ssh.wants(pids, tails, dirs, matches)

    async def request(self, op: str, args: dict | None = None,
                      timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict:
        return await self.ssh.request(op, args, timeout)

    # ------------------------------------------------------------------------------
    def _ssh_up(self) -> bool:
        return self._last.get("ssh", ("connecting",))[0] == HOST_CONNECTED

    def _state(self, side: str, state: str, error: str | None, hint: str | None, retry_at: float | None) -> None:
        self._last[side] = (state, error, hint, retry_at)
        self._report()

    def _report(self) -> None:
        ssh = self._last.get("ssh", ("connecting", None, None, None))
        prom = self._last.get("prometheus")
        if ssh[0] == HOST_CONNECTED or prom is None or prom[0] != HOST_CONNECTED:
            # SSH speaks when it is up, and when Prometheus has nothing better to say either.
            state, error, hint, retry_at = ssh
            if prom is not None and ssh[0] != HOST_CONNECTED and prom[0] != HOST_CONNECTED:
                hint = "; ".join(x for x in (hint, f"Prometheus: {prom[0]}: {prom[1]}") if x)
        else:
            state, error = prom[0], prom[1]
            ssh_words = f"SSH {ssh[0]}" + (f": {ssh[1]}" if ssh[1] else "")
            hint = "; ".join(x for x in (f"GPUs from Prometheus while {ssh_words}", ssh[2]) if x)
            retry_at = ssh[3]
        self.sink.host_state(self.name, state, error, hint, retry_at)

    def _sample(self, side: str, sample: HostSample) -> None:
        if side == "ssh" or not self._ssh_up():
            self.sink.host_sample(self.name, sample)

"""The seam between a source of host facts and the rest of gpuwatch.

A feed watches one host: it reports the host's state and its samples into a FeedSink, samples
what it is told to want, and carries requests (ops) to the host when it can. The store, the job
engine and the UI only ever see the sink's calls, never where a fact came from: the probe over
SSH or as a local child today; Prometheus samples or Slurm job specs can plug in the same way.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Protocol

from ..model import HostSample

DEFAULT_REQUEST_TIMEOUT_S = 10.0


class FeedSink(Protocol):
    """Where feeds report. `retry_at`: wall-clock time of the next connect attempt, if one is planned."""

    def host_state(self, host: str, state: str, error: str | None, hint: str | None,
                   retry_at: float | None = None) -> None: ...

    def host_sample(self, host: str, sample: HostSample) -> None: ...


class HostFeed(ABC):
    """One host's source of samples and the path for requests to it."""

    name: str
    state: str

    @abstractmethod
    def start(self) -> asyncio.Task:
        """Begin watching in the background; state changes and samples go to the sink."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop watching and release everything on the host; pending requests fail."""

    @abstractmethod
    async def wants(self, pids: list[int], tails: dict[str, str], dirs: dict[str, str],
                    matches: dict[str, dict]) -> None:
        """What to sample besides the GPUs: processes by pid, log tails and output dirs by key,
        processes found by cmdline regex or pid file (key -> {"regex", "pid_file"})."""

    @abstractmethod
    async def request(self, op: str, args: dict | None = None,
                      timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict:
        """Run `op` on the host and return its result; raises requests.RequestError."""

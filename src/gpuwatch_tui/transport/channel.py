"""The way to one host's probe: open it, tell a dead probe from a dead connection, drop it.

The host session drives this and never sees what carries the bytes; SSH specifics (asyncssh and
its errors) live in ssh_channel.py, which channel_choice.py imports only for hosts that need it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..config_records import HostConfig
from .link import LocalProbeLink, ProbeLink


class ProbeChannel(ABC):
    def __init__(self) -> None:
        # monotonic times of the latest attempt's steps (for `doctor`-style reports and benchmarks)
        self.timeline: dict[str, float] = {}

    @abstractmethod
    async def open_probe(self, options: dict) -> ProbeLink:
        """Start the probe. Raises ConnectFailure (host not reached) or ProbeExited (reached, no probe)."""

    async def is_lost(self) -> bool:
        """After the probe's stream ended: did the connection under it end too?"""
        return False

    def is_quiet(self) -> bool:
        """The connection is already closed: a goodbye to the probe would not arrive."""
        return False

    async def close(self, quiet: bool) -> None:
        """Drop the connection (the next open_probe makes a new one). quiet: don't wait for the peer."""

    def link_errors(self) -> tuple[type[BaseException], ...]:
        """Exceptions from the carrier that mean the link broke (reconnect, don't report a bug)."""
        return ()


class LocalProbeChannel(ProbeChannel):
    """The probe as a child process of gpuwatch; there is no connection to lose."""

    def __init__(self, host: HostConfig) -> None:
        super().__init__()
        self.host = host

    async def open_probe(self, options: dict) -> ProbeLink:
        return await LocalProbeLink.start(self.host, options)

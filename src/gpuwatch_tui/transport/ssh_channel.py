"""A host's probe over SSH: one shared connection per host, the probe on a session channel of it."""

from __future__ import annotations

import asyncio
import time

import asyncssh

from ..config_records import HostConfig
from .channel import ProbeChannel
from .link import ProbeExited, ProbeLink
from .ssh import SshConnector
from .ssh_link import SshProbeLink


class SshProbeChannel(ProbeChannel):
    def __init__(self, host: HostConfig, connector: SshConnector | None) -> None:
        super().__init__()
        self.host = host
        self.connector = connector
        self.conn: asyncssh.SSHClientConnection | None = None

    async def open_probe(self, options: dict) -> ProbeLink:
        if self.connector is None:
            raise ValueError(f"host {self.host.name} needs SSH but no SSH connector was given")
        self.timeline = {"start": time.monotonic()}
        if self.conn is None or self.conn.is_closed():
            self.conn = None
            self.conn = await self.connector.connect(self.host)
        self.timeline["ssh"] = time.monotonic()
        try:
            link = await SshProbeLink.start(self.conn, self.host, options)
        except asyncssh.ChannelOpenError as exc:
            # Reached, but no session (MaxSessions, a forced command): a probe failure, not a reconnect.
            raise ProbeExited(None, f"could not open a session channel: {exc.reason}") from None
        self.timeline["probe_sent"] = time.monotonic()
        return link

    async def is_lost(self) -> bool:
        conn = self.conn
        if conn is None:
            return True
        await asyncio.sleep(0)  # let asyncssh finish tearing a dead connection down
        # asyncssh drops the transport before it marks the connection closed.
        return conn.is_closed() or getattr(conn, "_transport", True) is None

    def is_quiet(self) -> bool:
        return self.conn is not None and self.conn.is_closed()

    async def close(self, quiet: bool) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if quiet:
            conn.abort()
        else:
            conn.close()
        try:
            await asyncio.wait_for(conn.wait_closed(), 1 if quiet else 3)
        except Exception:
            pass

    def link_errors(self) -> tuple[type[BaseException], ...]:
        return (asyncssh.Error,)

"""The probe on a remote host, over one session channel of an asyncssh connection."""

from __future__ import annotations

import asyncio

import asyncssh

from ..config_records import HostConfig
from .probe_bundle import remote_command
from .link import ProbeLink


class SshProbeLink(ProbeLink):
    """The probe on a remote host, on one session channel of a shared SSH connection."""

    def __init__(self, process: asyncssh.SSHClientProcess) -> None:
        super().__init__()
        self.process = process
        self.reader = process.stdout
        self.writer = process.stdin
        self._err_task = asyncio.ensure_future(self._collect_stderr(process.stderr))

    @classmethod
    async def start(cls, conn: asyncssh.SSHClientConnection, host: HostConfig, options: dict) -> "SshProbeLink":
        command = remote_command(host.python, list(host.prefix), dict(host.env))
        # No PTY: a user's RequestTTY must not turn our byte stream into a terminal.
        process = await conn.create_process(command, encoding=None, request_pty=False)
        link = cls(process)
        await link._ship(options)
        return link

    async def exit_status(self) -> int | None:
        try:
            await asyncio.wait_for(self.process.wait_closed(), 2)
        except (asyncio.TimeoutError, Exception):
            return None
        return self.process.exit_status

    async def close(self, wait: float = 3.0) -> None:
        try:
            self.process.stdin.write_eof()  # the probe exits when its stdin closes
        except Exception:
            pass
        try:
            await asyncio.wait_for(self.process.wait_closed(), wait)
        except Exception:
            self.process.close()
        self._err_task.cancel()

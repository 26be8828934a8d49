"""Run a Slurm command (an argv list) on the login node: here, or over SSH.

Locally the argv goes to exec directly (no shell). Over SSH a command line is a string the remote
shell reads, so every word is quoted with shlex.quote (job ids, user names and paths come from
config and from Slurm's own output). The SSH connection is the shared connector's, so the login
node's ~/.ssh/config entry, known_hosts and keepalive settings apply as for any watched host.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass

from ..config_records import HostConfig
from ..transport.failure import ConnectFailure

DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int | None  # None: it did not finish (timeout, link lost)
    stdout: str
    stderr: str
    error: str | None = None  # why it did not run or finish, in words

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None

    def failure(self) -> str:
        """One line for a person: what ran and why it failed."""
        # The command as a person would recognise it: the long --Format/--format spec left out.
        words = [a for a in self.argv if not a.lower().startswith(("--format=", "-o"))]
        what = " ".join(shlex.quote(a) for a in words).replace("\x1f", "")
        if self.error:
            return f"{what}: {self.error}"
        last = (self.stderr.strip().splitlines() or self.stdout.strip().splitlines() or [""])[-1]
        return f"{what}: exit status {self.returncode}" + (f": {last[:300]}" if last else "")


class CommandRunner:
    where: str = "?"

    async def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class LocalRunner(CommandRunner):
    """squeue & co. on this machine (gpuwatch runs on the login node)."""

    where = "local"

    async def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        _check_argv(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            return CommandResult(tuple(argv), None, "", "", f"{argv[0]} not found on this machine's PATH")
        except OSError as exc:
            return CommandResult(tuple(argv), None, "", "", f"could not start {argv[0]}: {exc.strerror}")
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return CommandResult(tuple(argv), None, "", "", f"no answer within {timeout:g}s (killed)")
        return CommandResult(tuple(argv), proc.returncode, out.decode("utf-8", "replace"),
                             err.decode("utf-8", "replace"))


class SshRunner(CommandRunner):
    """Commands on the login node over one shared SSH connection, reopened when it dies."""

    def __init__(self, host: HostConfig, connector) -> None:
        self.host = host
        self.connector = connector
        self.where = host.ssh or host.name
        self._conn = None
        self._lock = asyncio.Lock()

    async def _connection(self):
        async with self._lock:
            if self._conn is None or self._conn.is_closed():
                self._conn = await self.connector.connect(self.host)
            return self._conn

    async def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        _check_argv(argv)
        command = " ".join(shlex.quote(a) for a in argv)
        try:
            conn = await asyncio.wait_for(self._connection(), timeout)
            result = await asyncio.wait_for(conn.run(command, check=False, request_pty=False,
                                                   encoding="utf-8", errors="replace"), timeout)
        except ConnectFailure as exc:
            return CommandResult(tuple(argv), None, "", "", f"login node {self.where}: {exc}")
        except asyncio.TimeoutError:
            return CommandResult(tuple(argv), None, "", "", f"no answer from {self.where} within {timeout:g}s")
        except Exception as exc:  # asyncssh.Error, OSError: the link dropped mid-command
            self._conn = None
            return CommandResult(tuple(argv), None, "", "", f"login node {self.where}: {exc}")
        out = result.stdout if isinstance(result.stdout, str) else (result.stdout or b"").decode("utf-8", "replace")
        err = result.stderr if isinstance(result.stderr, str) else (result.stderr or b"").decode("utf-8", "replace")
        return CommandResult(tuple(argv), result.exit_status, out or "", err or "")

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _check_argv(argv: list[str]) -> None:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"a command is a non-empty list of strings, got {argv!r}")
    if any("\0" in a for a in argv):
        raise ValueError("a command word may not contain a NUL byte")

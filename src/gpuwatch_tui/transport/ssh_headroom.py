"""How many more session channels an SSH connection's server grants beside the ones open: each one opened
runs `cat` (which ends at EOF), until the server refuses one or a bound is reached; then all are closed."""

from __future__ import annotations

import asyncio
import dataclasses

import asyncssh


@dataclasses.dataclass(frozen=True)
class SessionHeadroom:
    opened: int  # extra session channels the server granted (at most the bound)
    refused: str | None  # the server's reason for the first one it refused; None: none refused
    error: str | None = None  # why headroom could not be measured (then `opened` and `refused` say nothing)


async def session_headroom(conn: asyncssh.SSHClientConnection, bound: int, timeout: float) -> SessionHeadroom:
    opened = []
    refused: str | None = None
    try:
        while len(opened) < bound:
            try:
                opened.append(await asyncio.wait_for(conn.create_process("cat"), timeout))
            except asyncssh.ChannelOpenError as exc:
                refused = exc.reason or "refused"
                break
    except (asyncio.TimeoutError, TimeoutError, asyncssh.Error, OSError) as exc:
        return SessionHeadroom(len(opened), None, f"{type(exc).__name__}: {exc}")
    finally:
        for process in opened:
            try:
                process.stdin.write_eof()
            except Exception:
                pass
            process.close()
        for process in opened:
            try:
                await asyncio.wait_for(process.wait_closed(), 3)
            except Exception:
                pass
    return SessionHeadroom(len(opened), refused)

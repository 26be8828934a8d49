"""Why a host could not be reached. Kept apart from ssh.py so local-only runs never import asyncssh."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ConnectFailure(Exception):
    """Why a host could not be reached, as a host state plus words."""

    state: str  # unreachable, auth-failed, host-key-unknown, host-key-changed
    reason: str
    hint: str | None = None

    def __str__(self) -> str:
        return self.reason

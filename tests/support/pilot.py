"""Waiting on a running Textual app from a test (Pilot): the screen updates on the app's own loop."""

from __future__ import annotations

import asyncio


async def wait_until(pilot, predicate, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out"
        await pilot.pause(0.1)

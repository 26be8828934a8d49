"""Stopping a background task: cancel it and wait until it has really ended, whatever it raised."""

from __future__ import annotations

import asyncio


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel `task` (None: nothing) and wait for it; its cancellation or failure is not ours to raise."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass

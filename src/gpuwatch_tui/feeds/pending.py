"""Requests in flight on one link, matched to their replies by id."""

from __future__ import annotations

import asyncio
import itertools

from ..requests import BAD_REPLY, RequestError


class PendingRequests:
    """Hands out ids, keeps one future per request, resolves it from the reply with that id."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def open(self) -> tuple[int, asyncio.Future]:
        rid = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        return rid, future

    def forget(self, rid: int) -> None:
        """The caller gave up (timeout, cancel): a late reply is then dropped."""
        self._waiting.pop(rid, None)

    def resolve(self, frame: dict) -> bool:
        """Settle the request a reply (or a pong) answers; False if nobody waits for it."""
        future = self._waiting.pop(frame.get("id"), None) if isinstance(frame.get("id"), int) else None
        if future is None or future.done():
            return False
        if frame.get("type") == "pong":
            future.set_result({"t": frame.get("t")})
        elif frame.get("ok") is True:
            result = frame.get("result")
            future.set_result(result if isinstance(result, dict) else {"value": result})
        else:
            error = frame.get("error")
            if isinstance(error, dict) and isinstance(error.get("code"), str):
                future.set_exception(RequestError(error["code"], str(error.get("message", ""))))
            else:
                future.set_exception(RequestError(BAD_REPLY, f"unreadable error reply: {str(frame)[:200]}"))
        return True

    def fail_all(self, code: str, message: str) -> None:
        """The link is gone: every waiting request fails now, none is left to hang."""
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(RequestError(code, message))

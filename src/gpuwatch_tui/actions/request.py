"""The one thing actions need from the core: `request(op, args, timeout) -> result`.

That is `HostSession.request` (or `Monitor.request` with the host bound). A failed request raises an
exception carrying `.code` and `.message` (the core's RequestError); actions turn those into reports.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from .report import RequestFailure

Request = Callable[[str, dict, float], Awaitable[dict]]

# After these the op may still have run on the host: its outcome is unknown, not failed.
OUTCOME_UNKNOWN_CODES = frozenset({"link-lost", "timeout"})


def failure_of(exc: BaseException) -> RequestFailure | None:
    """The failure a request raised; None for anything else (a bug must not pass as a refusal)."""
    code = getattr(exc, "code", None)
    if not isinstance(code, str):
        return None
    message = getattr(exc, "message", None) or str(exc)
    return RequestFailure(code, str(message), code in OUTCOME_UNKNOWN_CODES)

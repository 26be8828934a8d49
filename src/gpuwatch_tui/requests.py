"""Why a request to a host failed: one error type, with a code a program tests and words for a person.

Codes raised on this side of the link:
  unknown-host  no host by that name in the config
  host-down     the host is not connected now (connecting, unreachable, failed...): nothing was sent
  link-lost     the link dropped, or the watch stopped, while the request was waiting for its reply
  timeout       no reply within the request's timeout
  bad-args      the op name or arguments cannot be sent (not a JSON object)
  bad-reply     the probe answered with something that is not a reply
Codes the probe answers with (see probe/ops_base.py): unknown-op, bad-args, internal, busy, and
each op's own (gone, reused, ...).

After link-lost and timeout the op may still have run on the host: its outcome is unknown.
"""

from __future__ import annotations

UNKNOWN_HOST = "unknown-host"
HOST_DOWN = "host-down"
LINK_LOST = "link-lost"
TIMEOUT = "timeout"
BAD_ARGS = "bad-args"
BAD_REPLY = "bad-reply"

# The request may have reached the host and run there.
OUTCOME_UNKNOWN = frozenset({LINK_LOST, TIMEOUT})


class RequestError(Exception):
    """A request that got no result: `code` (see the module doc) and `message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def outcome_unknown(self) -> bool:
        """True when the op may have run anyway (the reply, not the request, was lost)."""
        return self.code in OUTCOME_UNKNOWN

    def __repr__(self) -> str:
        return f"RequestError({self.code!r}, {self.message!r})"

"""What every action returns: a typed result that serialises to JSON for the audit log and `--json`."""

from __future__ import annotations

import dataclasses
from typing import Any


class ActionResult:
    """Mixin for the per-action report dataclasses."""

    action: str

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)  # type: ignore[call-overload]
        out["action"] = self.action
        return out


@dataclasses.dataclass(frozen=True)
class RequestFailure:
    """A request that got no result: the core's error code and words; `outcome_unknown` when the op may
    have run anyway (the reply was lost, not the request)."""

    code: str
    message: str
    outcome_unknown: bool = False

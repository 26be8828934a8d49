"""A job's verdict (phase, since, evidence, advice) and what the hysteresis carries on it between
samples: the record the engine (phase.py) writes and the hysteresis (hysteresis.py) settles."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True, unsafe_hash=True)
class Memory:
    """What the hysteresis keeps between samples (carried on the shown Verdict). Read-only by
    convention, slotted rather than frozen (made with every verdict: phase.py says why)."""

    trained_since: float | None = None  # when the job was first shown training
    known: bool = False  # the job has been shown in a phase other than starting / unknown
    live_phase: str | None = None  # the last phase shown while the job's processes were alive
    pending: str | None = None  # a phase the samples suggest but that is not shown yet
    pending_count: int = 0
    since_note: str | None = None  # how `since` of a phase first seen mid-run was dated (phase.py)



@dataclass(slots=True, unsafe_hash=True)
class Verdict:
    phase: str
    since: float
    confidence: float
    detail: str | None = None
    evidence: tuple[str, ...] = ()
    advice: str = ""
    # Names of the actions that help (actions/registry.py): the UI shows their keys, the CLI
    # their verbs; the advice text itself names no key.
    actions: tuple[str, ...] = ()
    # What the hysteresis keeps between samples (jobs/hysteresis.py); not part of the verdict's JSON.
    memory: Memory = field(default_factory=Memory, compare=False, repr=False)

    def to_json(self) -> dict:
        return {
            "phase": self.phase,
            "detail": self.detail,
            "since": self.since,
            "confidence": round(self.confidence, 2),
            "evidence": list(self.evidence),
            "advice": self.advice,
            "actions": list(self.actions),
        }

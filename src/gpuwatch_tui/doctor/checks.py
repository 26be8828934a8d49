"""What `gpuwatch doctor` reports: per host, named checks that pass, warn, fail or were skipped."""

from __future__ import annotations

from dataclasses import dataclass, field

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
STATUSES = (PASS, WARN, FAIL, SKIP)

# The checks, in the order they run and print (a check skipped because an earlier one failed says which).
CHECK_NAMES = (
    "reachability", "host-key", "authentication", "python", "gpu-source",
    "py-spy", "ptrace", "channel-headroom", "clock-skew",
)


@dataclass(frozen=True)
class Check:
    name: str  # one of CHECK_NAMES
    status: str  # one of STATUSES
    summary: str  # one line: what was found, with numbers
    fix: str = ""  # what to do about a warn or a fail ("" when nothing)
    facts: dict = field(default_factory=dict)  # the raw figures behind the summary

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "summary": self.summary, "fix": self.fix,
                "facts": self.facts}


@dataclass(frozen=True)
class HostReport:
    host: str
    checks: tuple[Check, ...]

    @property
    def status(self) -> str:
        """The worst of the host's checks (skips do not count)."""
        seen = {c.status for c in self.checks}
        for worst in (FAIL, WARN):
            if worst in seen:
                return worst
        return PASS

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict:
        return {"host": self.host, "status": self.status, "checks": [c.to_json() for c in self.checks]}


def skipped_after(names: tuple[str, ...], why: str) -> list[Check]:
    return [Check(n, SKIP, why) for n in names]

"""What the last kill or restart did to each process of the job: signalled, exited, killed, survived,
permission denied. Shown in the job pane once an action has run (htop fails silently; we say it)."""

from __future__ import annotations

from rich.text import Text

from .themed_static import ThemedStatic

# Outcomes that leave nothing of the job running, and those a person must look at.
_GOOD = {"exited", "killed", "gone"}
_BAD = {"survived", "permission-denied", "reused"}


def outcome_dump(outcome):
    """The py-spy dump an outcome carries (its report, for a dump), or None."""
    report = getattr(outcome, "report", None)
    return report if hasattr(report, "analysis") and hasattr(report, "processes") else None


def process_outcomes(outcome) -> tuple:
    """The per-process outcomes inside an action outcome: the kill report's, or for a restart the
    report of the kill that preceded it. () when the action has none (a dump, a refused request)."""
    for holder in (outcome, getattr(outcome, "report", None)):
        if holder is None:
            continue
        rows = getattr(holder, "outcomes", None)
        if rows:
            return tuple(rows)
        kill = getattr(holder, "kill", None)
        if kill is not None and getattr(kill, "outcomes", None):
            return tuple(kill.outcomes)
    return ()


def outcome_words(row) -> str:
    """"exited after SIGTERM in 0.2 s", "killed (SIGKILL)", "permission denied: ..."."""
    word = row.outcome.replace("-", " ")
    if row.outcome == "exited" and row.ended_at_s is not None:
        word += f" after SIGTERM in {row.ended_at_s:.1f} s"
    elif row.outcome == "killed":
        word += " (SIGKILL)"
    elif row.outcome == "survived":
        word += " SIGKILL"
    if getattr(row, "continued", False):
        word += ", was stopped: SIGCONT sent"
    if row.message and row.outcome in _BAD:
        word += f": {row.message}"
    return word


class ActionOutcomeTable(ThemedStatic):
    def build(self, outcome, when: str) -> Text:
        p = self.palette
        text = Text(no_wrap=True, overflow="ellipsis")
        summary = list(outcome.summary()) if outcome is not None else []
        summary = [line for line in summary if not line.startswith("  ")]  # per-process lines: the rows below
        text.append(f"{when} ", p.style("muted"))
        text.append(summary[0] if summary else "", p.style("phase-training" if outcome.ok else "phase-crashed",
                                                           bold=True))
        for row in process_outcomes(outcome):
            style = p.style("phase-training") if row.outcome in _GOOD else (
                p.style("phase-crashed", bold=True) if row.outcome in _BAD else p.style("muted"))
            text.append(f"\n {row.pid:>7} {row.role:<10.10} ")
            text.append(outcome_words(row), style)
            if getattr(row, "name", ""):
                text.append(f"  {row.name}", p.style("muted"))
        return text

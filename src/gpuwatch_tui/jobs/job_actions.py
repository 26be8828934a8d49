"""What a person did to a job through gpuwatch, and how that changes the job's verdict.

A job gpuwatch killed must end as `crashed/killed` with who and when, never `finished` (its log may
look complete, a buffered job leaves no trace at all). A restart is recorded on the job it replaces
(same id); a py-spy dump's finding joins the evidence and, for a job already stalled, names the detail.
Pure functions over the job record; the tracker calls them while judging.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from .phase import DUMP, KILL, RESTART, Verdict

RUN_STARTED = "run_started"  # the run a restart started, as its host's record says (jobs/host_actions.py)
REAP = "reap"  # ending the processes a job left behind (actions/reap.py)


@dataclass(frozen=True)
class ActionRecord:
    action: str  # kill, restart_unbuffered, dump_stack (registry names)
    user: str  # the local user who confirmed it
    when: float  # local unix time the action began
    run: int = 0  # the tracker's serial of the job record (one per run) the action was taken on
    status_file: str | None = None  # restart: the wrapper's exit record of the run it started
    ref: str | None = None  # the id of the action's record on the host (probe/action_notes.py)

    def clock(self) -> str:
        return time.strftime("%H:%M:%S", time.localtime(self.when))

    def text(self) -> str:
        if self.action == KILL:
            return f"killed by {self.user} via gpuwatch at {self.clock()}"
        if self.action == RESTART:
            return f"restarted with -u by {self.user} via gpuwatch at {self.clock()}"
        if self.action == DUMP:
            return f"py-spy dump by {self.user} via gpuwatch at {self.clock()}"
        if self.action == REAP:
            return f"leftovers reaped by {self.user} via gpuwatch at {self.clock()}"
        return f"{self.action} by {self.user} via gpuwatch at {self.clock()}"


@dataclass(frozen=True)
class DumpFinding:
    """The latest dump's reading: an evidence line and, maybe, the phase hint (phase, detail)."""

    when: float
    evidence: str
    phase: str | None = None
    detail: str | None = None
    saved_to: str | None = None


def annotate(verdict: Verdict, finding: DumpFinding | None, *, ended: bool) -> Verdict:
    """The engine's verdict with the latest py-spy dump's reading. (A run gpuwatch killed is already
    crashed/killed "by whom" from the engine itself: jobs/ended_by.py.)"""
    if ended or finding is None:
        return verdict
    evidence = (*verdict.evidence, finding.evidence)
    if verdict.phase == "stalled" and finding.phase == "stalled" and finding.detail:
        # The stacks say what kind of stall it is; the engine already decided it is one.
        return dataclasses.replace(verdict, detail=finding.detail, evidence=evidence)
    return dataclasses.replace(verdict, evidence=evidence)


def events_text(records: list[ActionRecord]) -> tuple[str, ...]:
    """Every action on the job, oldest first, in words (the job's action history)."""
    return tuple(r.text() for r in records if r.action != RUN_STARTED)  # (the restart itself is listed)

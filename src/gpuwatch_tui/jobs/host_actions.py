"""The records a gpuwatch left on a host as it acted there (probe/action_notes.py), read into the jobs they name.

Any gpuwatch watching the host reads them, the one that acted included: a kill there ends the run as
`crashed (killed)` "killed by USER via gpuwatch" everywhere, and the run a restart started reads its exit
status from its wrapper's record whoever watches it. A record names processes by (pid, start ticks); one
whose process is not in a job yet (held back, not grouped) waits here a while for it.
"""

from __future__ import annotations

from ..model import ActionNote
from ..vocab import PHASES
from .job_actions import RUN_STARTED, ActionRecord, DumpFinding
from .job_state import JobState
from .phase import DUMP, KILL, RESTART

NOTE_WAIT_S = 120.0  # how long a record waits for a job with its process
MAX_WAITING = 64
_ACTIONS = {"kill": KILL, "restart_unbuffered": RESTART, "run_started": RUN_STARTED, "dump_stack": DUMP}


def note_jobs(jobs: list[JobState], notes: list[tuple[ActionNote, float]], skew: float,
              now: float) -> list[tuple[ActionNote, float]]:
    """Add each record (with the local time it came) to the job it names; returns those that found none yet."""
    waiting = []
    for note, came in notes:
        action = _ACTIONS.get(note.action)
        if action is None:
            continue
        targets = set(note.targets)
        named = [j for j in jobs if any((pid, ticks) in targets for pid, ticks in j.start_ticks.items())]
        if not named:
            if now - came < NOTE_WAIT_S:
                waiting.append((note, came))
            continue
        for job in named:
            if any(r.ref == note.id for r in job.actions):
                continue  # this gpuwatch's own action, recorded as it was taken
            job.actions.append(ActionRecord(action, note.user, note.when + skew, job.serial, note.status_file,
                                            ref=note.id))
            job.revision += 1
            if note.finding is not None:
                _take_finding(job, note, note.when + skew)
    return waiting[-MAX_WAITING:]


def _take_finding(job: JobState, note: ActionNote, when: float) -> None:
    """A dump's reading joins the job's evidence (job_actions.annotate) where it is the latest one known."""
    if job.dump_finding is not None and job.dump_finding.when >= when:
        return
    evidence, phase, detail = note.finding
    job.dump_finding = DumpFinding(when, evidence, phase if phase in PHASES else None, detail)

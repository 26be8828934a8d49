"""Whether a verdict rests on less history than the engine judges over: a one-shot `status` (seconds of samples)
and a dashboard that has watched for an hour run the same engine on the same window, so where the window is
short the verdict says so ("provisional", with how much history it had and how much it needs) rather than
being read as final. Read from the job's record only (its samples and its verdict), never from the clock:
a view made later from the same record says the same."""

from __future__ import annotations

from .activity import RATE_WINDOW_S
from .job_state import JobState

ENDED = frozenset({"crashed", "finished"})  # said by the exit or the log itself: no window can change them


def history_needed_s(job: JobState) -> float:
    """The span the verdict is judged over: the CPU / GPU rate window, or the job's stall limit where shorter."""
    return min(RATE_WINDOW_S, job.stall_after_s)


def provisional_why(job: JobState) -> str | None:
    """Why the job's verdict is provisional, or None where it is not."""
    v = job.verdict
    if v is None or job.exit is not None or not job.members or v.phase in ENDED:
        return None
    samples = job.samples
    had = samples[-1].time - samples[0].time if samples else 0.0
    need = history_needed_s(job)
    if had < need - 0.5:
        return f"{had:.0f} s of history of the {need:.0f} s the verdict is judged over"
    pending = v.memory.pending
    if pending is not None:
        return f"{pending} suggested by {v.memory.pending_count} sample(s), not confirmed yet"
    return None

"""A job's own rhythm, learnt from its log: how often its progress lines come, and how long its
evaluations, checkpoint saves and compiles took before. The phase engine reads a quiet log against it:
a job that stepped every 2 s and has been quiet for a minute with nothing else moving is stalled now,
not at the global `stall_after` (the ceiling, and all a job with no rhythm yet gets).

Fed once a frame by judging.observe (`note`); read by judging.observation (`quiet_limit`, `line`)."""

from __future__ import annotations

from collections import deque
from statistics import median

from ..vocab import fmt_duration

MIN_STEPS = 5  # intervals seen before a rhythm is trusted (a start-up burst is not one)
KEPT_STEPS = 31  # the newest intervals the median is taken over: a job that slows down is followed
STEP_MULTIPLE = 5.0  # quiet for this many usual intervals ...
FLOOR_S = 55.0  # ... and at least this long: a stall is never called sooner (with a sample's latency, named
#                  within the minute)
# Phases a job leaves and comes back to, each with its own length: quiet in one of them is read against
# the longest one seen, twice over (an evaluation on a bigger split, a save to a slower disk).
OWN_LENGTH_PHASES = ("evaluating", "checkpointing", "compiling", "loading")
PHASE_MULTIPLE = 2.0
KEPT_PHASES = 8  # lengths kept per phase


class Cadence:
    """The intervals between a job's progress lines (as the frames brought them) and the lengths of the
    phases it came back from."""

    __slots__ = ("intervals", "last_step_at", "phase_lengths", "_phase", "_phase_since", "_median")

    def __init__(self) -> None:
        self.intervals: deque[float] = deque(maxlen=KEPT_STEPS)
        self.last_step_at: float | None = None
        self.phase_lengths: dict[str, deque[float]] = {}
        self._phase: str | None = None
        self._phase_since = 0.0
        self._median: float | None = None

    def note(self, progress_at: float | None, hint) -> bool:
        """A frame's log facts: the time the progress last advanced, the phase line in force (a
        PhaseHint or None). True when what the rhythm says changed (the verdict must be judged again)."""
        changed = False
        if progress_at is not None and progress_at != self.last_step_at:
            if self.last_step_at is not None and progress_at > self.last_step_at:
                self.intervals.append(progress_at - self.last_step_at)
                old, self._median = self._median, (median(self.intervals) if len(self.intervals) >= MIN_STEPS
                                                   else None)
                changed = old != self._median
            self.last_step_at = progress_at
        phase = hint.phase if hint is not None else None
        if phase != self._phase:
            if self._phase in OWN_LENGTH_PHASES and hint is not None and hint.time > self._phase_since:
                lengths = self.phase_lengths.setdefault(self._phase, deque(maxlen=KEPT_PHASES))
                lengths.append(hint.time - self._phase_since)
                changed = True
            self._phase = phase
            self._phase_since = hint.since if hint is not None else 0.0
        return changed

    @property
    def step_s(self) -> float | None:
        """The usual interval between progress lines (the median of the newest), None until learnt."""
        return self._median

    def quiet_limit(self, phase: str | None, stall_after: float) -> float:
        """How long the log may be quiet in `phase` (the phase line in force) before the job is judged
        on its silence: the rhythm's limit where one is known, never past `stall_after`."""
        if phase in OWN_LENGTH_PHASES:
            lengths = self.phase_lengths.get(phase)
            if not lengths:
                return stall_after  # a first evaluation or save: nothing to compare it with
            return min(stall_after, max(FLOOR_S, PHASE_MULTIPLE * max(lengths)))
        if self._median is None or phase not in (None, "training"):
            return stall_after
        return min(stall_after, max(FLOOR_S, STEP_MULTIPLE * self._median))

    def line(self, phase: str | None, now: float) -> str | None:
        """The evidence: "last step 48s ago; usually every 2.0 s (median of 15)"."""
        if phase in OWN_LENGTH_PHASES:
            lengths = self.phase_lengths.get(phase)
            if not lengths:
                return None
            return f"{phase} took up to {fmt_duration(max(lengths))} before ({len(lengths)} seen)"
        if self._median is None or self.last_step_at is None:
            return None
        return (f"last step {fmt_duration(max(0.0, now - self.last_step_at))} ago; "
                f"usually every {self._median:.1f} s (median of {len(self.intervals)})")

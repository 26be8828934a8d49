"""When the shown verdict of a job may change: the one hysteresis rule of the phase engine.

The rules in phase.py judge each sample on its own. Real jobs dip: a batch-size change took an OOM test
job's GPU to 47 % for one second, a compile job's compiler children came and went between samples. A
verdict that follows every sample flaps (training -> starting -> training, compiling -> unknown ->
compiling). So, here and nowhere else:

- Decisive evidence changes the verdict at once: the processes are gone, a traceback, a new log line
  announcing the phase (the rule that made the decision says so: `Decision.decisive`).
- Leaving a provisional phase (`starting`, `unknown`) is immediate: that is the job becoming known.
- Any other change must be suggested by CONFIRM_SAMPLES samples in a row (UNKNOWN_CONFIRM_SAMPLES to
  fall back to `unknown` on a live job) before it is shown; until then the previous phase holds and the
  evidence says what the last sample alone suggested.
- A job is `starting` only until it is first known to be anything else: it never goes back to it. A
  job that has trained never goes back to `loading` either, unless a log line written after training
  began announces it: a dip is not a restart.
"""

from __future__ import annotations

from dataclasses import replace

from ..vocab import ENDED_PHASES
from .verdict import Memory, Verdict

CONFIRM_SAMPLES = 2
UNKNOWN_CONFIRM_SAMPLES = 3
PROVISIONAL = frozenset({"starting", "unknown"})


def settle(previous: Verdict | None, candidate: Verdict, decisive: bool, alive: bool,
           since_note: str | None = None) -> Verdict:
    """The verdict to show, given the last one shown and what this sample alone concludes."""
    prev_mem = previous.memory if previous is not None else Memory()
    shown = _choose(previous, candidate, decisive, prev_mem)
    trained = prev_mem.trained_since
    if trained is None and shown.phase == "training":
        trained = shown.since
    pending = None if shown.phase == candidate.phase else candidate.phase
    count = 0
    if pending is not None:
        count = prev_mem.pending_count + 1 if prev_mem.pending == pending else 1
    live = shown.phase if alive else prev_mem.live_phase
    known = prev_mem.known or shown.phase not in PROVISIONAL
    note = since_note if shown.phase == candidate.phase else prev_mem.since_note
    # Built directly, not with dataclasses.replace: this runs for every job on every frame.
    return type(shown)(shown.phase, shown.since, shown.confidence, shown.detail, shown.evidence, shown.advice,
                       shown.actions, Memory(trained, known, live, pending, count, note))


def _choose(previous: Verdict | None, candidate: Verdict, decisive: bool, mem: Memory) -> Verdict:
    if previous is None or previous.phase == candidate.phase or candidate.phase in ENDED_PHASES:
        return candidate
    if previous.phase in ENDED_PHASES:
        return candidate  # an ended job seen again (its record was reused): follow the facts
    if candidate.phase == "starting" and mem.known:
        return _hold(previous, candidate, f"started long since: {previous.phase} holds (a dip is not a restart)")
    back = candidate.phase == "loading" and mem.trained_since is not None
    if back and not (decisive and candidate.since > mem.trained_since):
        return _hold(previous, candidate, "a dip after training, not a reload: loading not shown")
    if decisive or previous.phase in PROVISIONAL:
        return candidate
    needed = UNKNOWN_CONFIRM_SAMPLES if candidate.phase == "unknown" else CONFIRM_SAMPLES
    seen = (mem.pending_count if mem.pending == candidate.phase else 0) + 1
    if seen >= needed:
        return candidate
    return _hold(previous, candidate, f"{candidate.phase} suggested by {seen} sample(s) only; "
                                      f"{previous.phase} until {needed} in a row")


def _hold(previous: Verdict, candidate: Verdict, why: str) -> Verdict:
    """Keep the shown phase; the evidence is this sample's facts, prefixed with why the phase held."""
    facts = tuple(e for e in candidate.evidence if not e.startswith("started "))
    return replace(previous, evidence=(why, *facts)[:12])

"""The rank that holds everyone up, in a job over several ranks.

In a collective every rank waits for the slowest: a hang shows on all of them, the cause on one. Read
in order of certainty:
1. a rank's process is stopped (T), gone, a zombie, or in uninterruptible sleep (D) while others are not;
2. a rank's GPU is idle (~0 % util) while the others spin at ~100 % util at idle power (a waiting NCCL
   collective: measured on H200 at ~121 W against ~690 W when training);
3. a rank's host log went quiet well before the others' (it stopped first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..views import RankView
from .job_actions import DUMP, KILL

SPIN_UTIL_PCT = 90.0  # a waiting collective keeps the GPU "busy"
IDLE_UTIL_PCT = 5.0
# ... at a fraction of the power of real work: ~128 W of a 700 W H200 spinning, where even an
# all-reduce-only loop draws ~260 W and training ~690 W.
SPIN_POWER_SHARE = 0.25
SPIN_POWER_W = 175.0  # per GPU, when the power limit is unknown
QUIET_GAP_S = 20.0  # a host log this much older than the others' went quiet first

PROCESS_CAUSES = {
    "T": "process stopped (T)",
    "gone": "process gone",
    "Z": "process exited, not reaped (zombie)",
    "D": "process in uninterruptible sleep (D)",
}


@dataclass(frozen=True)
class Culprit:
    notes: dict[int, str]  # index in the rank list -> why that rank is the one
    summary: str  # one evidence line: "rank 1 on node-b: process stopped (T); rank 0 spinning in a collective"
    advice: str
    actions: tuple[str, ...] = field(default=())


def rank_name(r: RankView) -> str:
    return f"rank {r.rank if r.rank is not None else '?'} on {r.host}"


def rank_list(ranks: list[RankView]) -> str:
    """"ranks 0-2,4-7" (or "rank 0"), numbers folded into runs."""
    nums = sorted({r.rank for r in ranks if r.rank is not None})
    unnamed = sum(1 for r in ranks if r.rank is None)
    runs: list[str] = []
    start = prev = None
    for n in nums + [None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = n
    text = ",".join(runs)
    if unnamed:
        text = f"{text}{',' if text else ''}{unnamed} unnamed"
    return ("ranks " if len(nums) + unnamed > 1 else "rank ") + text


def _spinning(r: RankView) -> bool:
    if r.util_pct is None or r.util_pct < SPIN_UTIL_PCT or r.power_w is None:
        return False
    if r.power_limit_w:
        return r.power_w <= SPIN_POWER_SHARE * r.power_limit_w
    return r.power_w <= SPIN_POWER_W * max(1, len(r.gpus))


def find_culprit(ranks: list[RankView], now: float) -> Culprit | None:
    if len(ranks) < 2:
        return None
    spinning = [r for r in ranks if _spinning(r)]

    def others_text(culprits: set[int]) -> str:
        rest = [r for i, r in enumerate(ranks) if i not in culprits]
        if not rest:
            return ""
        spin = [r for r in rest if _spinning(r)]
        if spin and len(spin) == len(rest):
            w = max(r.power_w or 0.0 for r in spin)
            return f"{rank_list(rest)} spinning in a collective (GPU ~100 % util at {w:.0f} W)"
        states = {r.state for r in rest}
        return f"{rank_list(rest)} waiting" + (f" (state {'/'.join(sorted(states))})" if states else "")

    # 1. The process itself: stopped, gone, zombie, stuck in D, when not every rank is.
    for state in ("T", "gone", "Z", "D"):
        hit = {i for i, r in enumerate(ranks) if r.state == state}
        if hit and len(hit) < len(ranks):
            notes = {i: PROCESS_CAUSES[state] for i in hit}
            head = "; ".join(f"{rank_name(ranks[i])}: {notes[i]}" for i in sorted(hit))
            advice = {
                "T": "a stopped rank holds every collective: send it SIGCONT, or kill the job",
                "gone": "a rank has died: the others wait for it until the watchdog fires; kill the job",
                "Z": "a rank has exited: the others wait for it; kill the job",
                "D": "a rank is stuck in the kernel (I/O, a driver): dump its stack, or kill the job",
            }[state]
            return Culprit(notes, f"{head}; {others_text(hit)}".rstrip("; "), advice, (KILL, DUMP))
    # 2. The GPU: idle on one rank while the rest spin in a collective at idle power.
    idle = {i for i, r in enumerate(ranks) if r.util_pct is not None and r.util_pct <= IDLE_UTIL_PCT}
    if spinning and idle and len(idle) + len(spinning) == len(ranks):
        notes = {i: f"GPU {','.join(map(str, ranks[i].gpus))} at {ranks[i].util_pct:.0f} % util" for i in idle}
        head = "; ".join(f"{rank_name(ranks[i])}: {notes[i]}" for i in sorted(idle))
        return Culprit(notes, f"{head}; {others_text(idle)}",
                       "the spinning ranks wait in a collective for the idle one: dump every rank's stack", (DUMP, KILL))
    # 3. The log: the host whose log went quiet first.
    times = [r.last_log_at for r in ranks]
    if all(t is not None for t in times) and len(set(times)) > 1:
        oldest = min(times)  # type: ignore[type-var]
        newest = max(times)  # type: ignore[type-var]
        if newest - oldest >= QUIET_GAP_S:
            hit = {i for i, t in enumerate(times) if t == oldest}
            notes = {i: f"its log went quiet first ({now - oldest:.0f} s ago; the others {now - newest:.0f} s ago)"
                     for i in hit}
            head = "; ".join(f"{rank_name(ranks[i])}: {notes[i]}" for i in sorted(hit))
            return Culprit(notes, head, "the rank that went quiet first is the likely cause: dump every rank's stack",
                           (DUMP, KILL))
    return None

"""Which job a person means by what they typed: its short id, its internal id, or a name that only
one job has. Everyone's script is `train.py`: a name that several jobs share is refused with every
candidate listed (the verbs exit 2 and signal nothing), never resolved to the first one found."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import GpuwatchError
from ..safe_text import safe_text
from ..views import JobView
from ..vocab import fmt_duration


class AmbiguousJob(GpuwatchError):
    """A name that several jobs on the host share; `candidates` are those jobs."""

    def __init__(self, host: str, text: str, candidates: list[JobView], now: float) -> None:
        self.host = host
        self.text = text
        self.candidates = candidates
        lines = [f"{len(candidates)} jobs on {safe_text(host)} are named {safe_text(text)!r}; "
                 "name one by its id:", *candidate_lines(candidates, now)]
        super().__init__("\n".join(lines))


def on_host(views: Iterable[JobView], host: str) -> list[JobView]:
    """The jobs of `host`: its own and the runs over several hosts that include it."""
    return [v for v in views if v.host == host or host in v.hosts]


def find_job(views: Iterable[JobView], host: str, text: str, now: float) -> JobView | None:
    """The job on `host` that `text` names: by short id or id first, else by name. Several live jobs of
    that name (or, none live, several ended ones) raise AmbiguousJob; None when nothing matches."""
    mine = on_host(views, host)
    by_id = [v for v in mine if text in (v.short_id, v.id)]
    if by_id:
        return by_id[0]
    named = [v for v in mine if v.name == text]
    live = [v for v in named if v.alive]
    chosen = live or named
    if len(chosen) > 1:
        raise AmbiguousJob(host, text, sorted(chosen, key=started), now)
    return chosen[0] if chosen else None


def started(view: JobView) -> float:
    """When the job was first seen in its phase history (its verdict's since when it has none)."""
    return view.history[0].since if view.history else view.since


def candidate_lines(views: list[JobView], now: float) -> list[str]:
    """One line per job: id, name, pids, age, phase (what tells same-named jobs apart)."""
    rows = []
    for v in views:
        pids = ",".join(str(p) for p in v.pids[:8]) + ("..." if len(v.pids) > 8 else "") or "-"
        age = fmt_duration(max(0.0, now - started(v)))
        rows.append((v.short_id or v.id, v.name, pids, age, v.phase if v.alive else f"{v.phase} (ended)"))
    width = [max([len(h)] + [len(safe_text(r[i])) for r in rows]) for i, h in enumerate(_HEADER)]
    out = ["  " + "  ".join(h.ljust(width[i]) for i, h in enumerate(_HEADER)).rstrip()]
    out += ["  " + "  ".join(safe_text(c).ljust(width[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    return out


_HEADER = ("ID", "NAME", "PIDS", "AGE", "PHASE")

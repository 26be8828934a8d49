"""A configured job's `match` regex that is too broad: it takes pid 1, or process trees of unrelated
sessions (`python` matches everyone's jobs, `train` matches `tail -f train.log` in a shell).

The check is a pure function of what the regex matched in one scan; the tracker shows its warning
as the first line of the configured job's evidence, with the processes it matched, so `status` and
the dashboard both say why the job looks odd.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from ..model import HostSample, ProcInfo
from .settings import JobSpec

MAX_LISTED = 4
MAX_CMDLINE_CHARS = 40


def match_warning(spec: JobSpec, matched: Iterable[ProcInfo]) -> str | None:
    """The warning for a spec whose regex matched `matched` on one host, or None when it looks right.

    Separate trees in one session (a launcher, its ranks, a shell script's steps) are one user's
    work; trees in different sessions, or pid 1, are not what a job's regex should match.
    """
    if not spec.match:
        return None  # a pid file names exactly one process
    procs = {p.pid: p for p in matched}
    if not procs:
        return None
    descendants = {c.pid for p in procs.values() for c in p.children}
    roots = sorted((p for p in procs.values() if p.pid not in descendants), key=lambda p: p.pid)
    sessions = {p.sid for p in roots}
    if 1 not in procs and len(sessions) < 2:
        return None
    why = "pid 1" if 1 in procs else f"{len(roots)} process trees in {len(sessions)} sessions"
    shown = [_describe(p) for p in ([procs[1]] if 1 in procs else []) + [p for p in roots if p.pid != 1]]
    more = len(shown) - MAX_LISTED
    listed = "; ".join(shown[:MAX_LISTED]) + (f"; +{more} more" if more > 0 else "")
    return f"match {spec.match!r} is too broad: it matches {why}: {listed}"


def _describe(p: ProcInfo) -> str:
    cmd = " ".join(p.cmdline) or p.name
    if len(cmd) > MAX_CMDLINE_CHARS:
        cmd = cmd[: MAX_CMDLINE_CHARS - 1] + "…"
    return f"{p.pid} ({cmd})"


def note_broad_matches(jobs: Iterable, specs: Mapping[str, JobSpec], sample: HostSample) -> None:
    """Put each configured job's match warning first in its verdict's evidence (once)."""
    key_of = {id(spec): key for key, spec in specs.items()}
    for job in jobs:
        if job.spec is None or job.verdict is None:
            continue
        key = key_of.get(id(job.spec))
        matched = [sample.procs[p] for p in sample.matches.get(key, []) if p in sample.procs]
        warning = match_warning(job.spec, matched)
        if warning and warning not in job.verdict.evidence:
            job.verdict = dataclasses.replace(job.verdict, evidence=(warning, *job.verdict.evidence))

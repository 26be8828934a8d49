"""From the tracker's mutable JobState to the frozen JobView every reader gets."""

from __future__ import annotations

import math

from ..model import ProcessRef
from ..views import JobView, PhaseEntry, ProgressPointView, ProgressView, finite_or_none
from .job_actions import events_text
from .job_state import JobState
from .progress import Progress, json_number

PROGRESS_POINTS = 100  # progress history points a view carries (enough for a chart)


def progress_view(progress: Progress) -> ProgressView:
    # The numbers JSON-ready (ints, None for non-finite) by Progress.to_json's own rule: one rounding
    # rule, not two (built directly rather than through its dict: this runs for every job's frame).
    num = json_number
    loss = progress.loss
    return ProgressView(
        step=num(progress.step), total=num(progress.total), rate=num(progress.rate), unit=progress.unit,
        loss=num(loss), epoch=num(progress.epoch), eta_s=num(progress.eta_s), epochs=num(progress.epochs),
        lr=num(progress.lr), desc=progress.desc, updated_at=progress.updated_at,
        loss_text=str(loss) if loss is not None and not math.isfinite(loss) else None,
    )


def current_view(job: JobState, now: float | None = None) -> JobView:
    """`job_view`, reusing the last one built while no frame of the job's host came in since
    (the dashboard asks for every job twice a second; a host reports once). Asked again at the same
    time, even the history text (its durations read `now`) is not made again."""
    at = now if now is not None else job.last_seen
    history = job.history
    basis = (job.revision, job.verdict, len(history), history[-1] if history else None)
    kept = job.view_parts.get("view")
    if kept is not None and kept[0] == basis and kept[0][1] is job.verdict:
        if kept[1] == at:
            return kept[3]
        text = job.history_text(at)
        if kept[2] == text:
            job.view_parts["view"] = (basis, at, text, kept[3])
            return kept[3]
    else:
        text = job.history_text(at)
    view = job_view(job, now, text)
    job.view_parts["view"] = (basis, at, text, view)
    return view


def job_view(job: JobState, now: float | None = None, history_text: str | None = None) -> JobView:
    v = job.verdict
    interp = job.interp
    code = job.exit.exit_code if job.exit else None
    if code is None and job.exit is not None and interp is not None:
        code = interp.exit_code  # as torchrun reported it
    log = job.primary_log
    processes, root = _process_refs(job)
    return JobView(
        id=job.id,
        name=job.name,
        host=job.host,
        pids=tuple(job.pids),
        gpus=tuple(job.gpus),
        phase=v.phase if v else "unknown",
        detail=v.detail if v else None,
        since=v.since if v else job.first_seen,
        confidence=round(v.confidence, 2) if v else 0.0,
        evidence=tuple(v.evidence) if v else (),
        advice=v.advice if v else "",
        actions=tuple(v.actions) if v else (),
        log=next(iter(job.logs), None),
        logs=tuple(job.logs),
        exit_code=code,
        exit_signal=job.exit.signal if job.exit else None,
        progress=_kept_progress_view(job, interp.progress.current) if interp else ProgressView(),
        history=_history_entries(job),
        configured=job.spec is not None,
        launcher=job.launcher,
        alive=job.alive,
        ended_at=job.exit.ended_at if job.exit else None,
        output_dir=job.output_dir,
        log_lines=log.total_lines if log else 0,
        stall_after_s=job.stall_after_s,
        progress_history=progress_history_view(job),
        history_text=history_text if history_text is not None else job.history_text(
            now if now is not None else job.last_seen),
        processes=processes,
        root=root,
        events=_events(job),
    )


# The parts below change far less often than a view is built (every frame of the job's host): each is
# kept in `job.view_parts` with what it was made from, and made again only when that changed.
def _process_refs(job: JobState) -> tuple[tuple[ProcessRef, ...], ProcessRef | None]:
    ticks = job.start_ticks
    basis = (tuple(job.members.items()), tuple(ticks.items()), job.root)
    kept = job.view_parts.get("process_refs")
    if kept is not None and kept[0] == basis:
        return kept[1]
    root = None
    if job.root is not None and job.root[0] in ticks:
        root = ProcessRef(job.host, job.root[0], ticks[job.root[0]])
    refs = (tuple(ProcessRef(job.host, pid, ticks[pid]) for pid in job.pids if pid in ticks), root)
    job.view_parts["process_refs"] = (basis, refs)
    return refs


def _kept_progress_view(job: JobState, progress: Progress) -> ProgressView:
    basis = tuple(progress.__dict__.values())
    kept = job.view_parts.get("progress")
    if kept is not None and kept[0] == basis:
        return kept[1]
    view = progress_view(progress)
    job.view_parts["progress"] = (basis, view)
    return view


def _history_entries(job: JobState) -> tuple[PhaseEntry, ...]:
    history = job.history
    basis = tuple(history)  # (a merged job's history may be replaced whole: compare all of it)
    kept = job.view_parts.get("history")
    if kept is not None and kept[0] == basis:
        return kept[1]
    entries = tuple(PhaseEntry(phase, since) for phase, since in history)
    job.view_parts["history"] = (basis, entries)
    return entries


def _events(job: JobState) -> tuple[str, ...]:
    basis = tuple(job.actions)
    kept = job.view_parts.get("events")
    if kept is not None and kept[0] == basis:
        return kept[1]
    events = events_text(job.actions)
    job.view_parts["events"] = (basis, events)
    return events


def progress_history_view(job: JobState) -> tuple[ProgressPointView, ...]:
    """The last PROGRESS_POINTS points. Views are built for every job twice a second and the
    history only grows at its end: the points already made are kept, only new ones are made."""
    if job.interp is None:
        return ()
    history = job.interp.progress.history
    cached_last, points = job.view_parts.get("progress_history", (None, ()))
    last = history[-1] if history else None
    if last is cached_last:
        return points
    new = []
    found = False
    for i in range(1, min(len(history), PROGRESS_POINTS) + 1):
        p = history[-i]
        if cached_last is not None and p is cached_last:
            found = True
            break
        new.append(ProgressPointView(p.time, p.step, p.total, finite_or_none(p.loss), p.epoch))
    new.reverse()
    points = (points + tuple(new))[-PROGRESS_POINTS:] if found else tuple(new)
    job.view_parts["progress_history"] = (last, points)
    return points

"""From the tracker's mutable JobState to the frozen JobView every reader gets."""

from __future__ import annotations

import dataclasses
import math
from math import isfinite
from operator import attrgetter

from ..model import ProcessRef
from ..views import JobView, PhaseEntry, ProgressPointView, ProgressView
from ..vocab import fmt_duration, fmt_duration_span
from .job_actions import events_text
from .provisional import provisional_why
from .job_state import JobState
from .activity import format_history
from .progress import Progress, ProgressPoint, json_number

PROGRESS_POINTS = 100  # progress history points a view carries (enough for a chart)
_set = object.__setattr__
_new_object = object.__new__


def progress_view(progress: Progress) -> ProgressView:
    """The progress as a view: its numbers JSON-ready (ints, None for non-finite) by Progress.to_json's
    own rule, json_number (one rounding rule, not two)."""
    return _next_progress_view(_progress_values(progress), None, None)


# The order of a Progress's values as `_progress_values` reads them (KeptView keeps them so).
_RAW_ORDER = ("step", "total", "rate", "unit", "loss", "epoch", "epochs", "eta_s", "lr", "desc", "updated_at")
assert set(_RAW_ORDER) <= {f.name for f in dataclasses.fields(Progress)}


def _progress_values(p: Progress) -> tuple:
    """The values of a Progress that its view shows, in _RAW_ORDER, read by name. Not `vars(p)`: that
    makes CPython build the instance's dict, after which every attribute the log reader sets on it each
    line (ProgressTracker.merge) takes the slow generic way (~75k instructions per host-sample at 8 jobs)."""
    return (p.step, p.total, p.rate, p.unit, p.loss, p.epoch, p.epochs, p.eta_s, p.lr, p.desc, p.updated_at)


_NEVER_EQUAL = (object(),) * len(_RAW_ORDER)  # old values no value equals: every field made


def _next_progress_view(raw: tuple, old_raw: tuple | None, old: ProgressView | None) -> ProgressView:
    """The view of the progress values `raw`, made from `old` (the view of the values `old_raw`; None:
    none before): only the numbers that moved are converted again (a training line moves the step,
    loss, rate and ETA; the rest holds). One dict display, no loop over the fields: this runs for
    every job on every frame."""
    if old_raw is None:
        old_raw = _NEVER_EQUAL
    step, total, rate, unit, loss, epoch, epochs, eta_s, lr, desc, updated_at = raw
    was_step, was_total, was_rate, _, was_loss, was_epoch, was_epochs, was_eta_s, was_lr, _, _ = old_raw
    f = old.__dict__ if old is not None else None
    num = json_number
    fields = {
        "step": f["step"] if step == was_step else num(step),
        "total": f["total"] if total == was_total else num(total),
        "rate": f["rate"] if rate == was_rate else num(rate),
        "unit": unit,
        "loss": f["loss"] if loss == was_loss else num(loss),
        "epoch": f["epoch"] if epoch == was_epoch else num(epoch),
        "eta_s": f["eta_s"] if eta_s == was_eta_s else num(eta_s),
        "epochs": f["epochs"] if epochs == was_epochs else num(epochs),
        "lr": f["lr"] if lr == was_lr else num(lr),
        "desc": desc,
        "updated_at": updated_at,
        "loss_text": f["loss_text"] if loss == was_loss else (
            str(loss) if loss is not None and not isfinite(loss) else None),
    }
    view = _new_object(ProgressView)
    _set(view, "__dict__", fields)  # the instance dict ProgressView(**fields) would fill, in one step
    return view


# A view made by _next_progress_view holds ProgressView's fields, in its order, and no other.
assert tuple(progress_view(Progress()).__dict__) == tuple(f.name for f in dataclasses.fields(ProgressView))


def current_view(job: JobState, now: float | None = None) -> JobView:
    """`job_view` at `now` (default: the job's last frame), made from the view built before.

    The dashboard asks for every job twice a second and most of a view holds still between frames:
    each part is made again only when what it is made of changed (kept in `job.view_parts`), the
    new view shares the others with the last one, and a view whose parts all held is returned as is.
    Equal to a view built from scratch (tests/jobs/test_view_reuse.py checks it frame by frame)."""
    at = now if now is not None else job.last_seen
    kept = job.view_parts.get("kept")
    if kept is None:
        kept = job.view_parts["kept"] = KeptView(job, at)
        return kept.view
    if job.revision == kept.revision and job.verdict is kept.verdict and job.exit is kept.exit:
        # Asked again with no frame, judgement or action in between (each bumps the revision or
        # makes a new verdict): only the age of the last phase in the history text can have moved.
        return kept.view if at == kept.at else kept.aged(at)
    return kept.refresh(job, at)


def current_views(jobs, now: float | None, facts_of) -> tuple[list[JobView], list]:
    """(`current_view` of each job, `facts_of(job)` of each): the tracker's views and the multi-host
    join's run facts, in one pass. A job asked again with no frame since gets the facts kept with its
    view, asked once per view made (they hold while the revision does: no frame of its host, the same
    processes)."""
    views = []
    facts = []
    for job in jobs:
        views.append(current_view(job, now))
        kept = job.view_parts["kept"]
        f = kept.facts
        if f is None:
            f = kept.facts = facts_of(job)
        facts.append(f)
    return views, facts


def job_view(job: JobState, now: float | None = None) -> JobView:
    """The job's view built from scratch (`current_view` makes the same from the last one)."""
    at = now if now is not None else job.last_seen
    fields = dict(zip(_SCALARS, _scalars(job)))
    fields.update(_verdict_fields(job, job.verdict))
    fields.update(_process_fields(job))
    fields.update(_log_fields(job))
    fields.update(_exit_fields(job))
    fields["gpus"] = tuple(job.gpus)
    fields["progress"] = progress_view(job.interp.progress.current) if job.interp else _NO_PROGRESS
    fields["progress_history"] = _progress_points(job.interp.progress.history if job.interp else (), None, ())[1]
    fields["history"] = tuple(PhaseEntry(phase, since) for phase, since in job.history)
    fields["history_text"] = job.history_text(at)
    fields["events"] = events_text(job.actions)
    fields["provisional"] = provisional_why(job)
    fields["leftovers"] = _leftovers(job)
    return JobView(**fields)


def _leftovers(job: JobState):
    watch = job.leftovers
    return watch.view if watch is not None else None


# Each group of a view's fields, made from one part of the job: `job_view` makes them all,
# `KeptView.refresh` only those whose part changed.
_SCALARS = ("id", "name", "host", "configured", "launcher", "output_dir", "stall_after_s", "short_id")
_NO_PROGRESS = ProgressView()


def _scalars(job: JobState) -> tuple:
    return (job.id, job.name, job.host, job.spec is not None, job.launcher, job.output_dir, job.stall_after_s,
            job.short_id)


def _verdict_fields(job: JobState, v) -> dict:
    if v is None:
        return {"phase": "unknown", "detail": None, "since": job.first_seen, "confidence": 0.0, "evidence": (),
                "advice": "", "actions": ()}
    return {"phase": v.phase, "detail": v.detail, "since": v.since, "confidence": round(v.confidence, 2),
            "evidence": tuple(v.evidence), "advice": v.advice, "actions": tuple(v.actions)}


def _process_fields(job: JobState) -> dict:
    ticks = job.start_ticks
    root = None
    if job.root is not None and job.root[0] in ticks:
        root = ProcessRef(job.host, job.root[0], ticks[job.root[0]])
    pids = tuple(job.pids)
    return {"pids": pids, "processes": tuple(ProcessRef(job.host, pid, ticks[pid]) for pid in pids if pid in ticks),
            "root": root}


def _log_fields(job: JobState) -> dict:
    log = job.primary_log
    return {"log": next(iter(job.logs), None), "logs": tuple(job.logs), "log_lines": log.total_lines if log else 0}


def _exit_code(job: JobState) -> int | None:
    code = job.exit.exit_code if job.exit else None
    if code is None and job.exit is not None and job.interp is not None:
        code = job.interp.exit_code  # as torchrun reported it
    return code


def _exit_fields(job: JobState) -> dict:
    ex = job.exit
    return {"exit_code": _exit_code(job), "exit_signal": ex.signal if ex else None,
            "ended_at": ex.ended_at if ex else None, "alive": job.alive}


def _progress_points(history, cached_last, points: tuple) -> tuple:
    """(the newest point, the view's last PROGRESS_POINTS points). The history only grows at its
    end: the points already made (`points`, up to `cached_last`) are kept, only newer ones made."""
    last = history[-1] if history else None
    if last is cached_last:
        return last, points
    if cached_last is not None and len(history) > 1 and history[-2] is cached_last:  # one new point: the usual
        point = _point_view(last)
        return last, points + (point,) if len(points) < PROGRESS_POINTS else points[1 - PROGRESS_POINTS:] + (point,)
    new = []
    found = False
    for i in range(1, min(len(history), PROGRESS_POINTS) + 1):
        p = history[-i]
        if cached_last is not None and p is cached_last:
            found = True
            break
        new.append(_point_view(p))
    new.reverse()
    return last, (points + tuple(new))[-PROGRESS_POINTS:] if found else tuple(new)


_new_tuple = tuple.__new__
# A ProgressPoint's first values are a point view's, in its order: the view is made from its slice.
assert ProgressPoint._fields[:len(ProgressPointView._fields)] == ProgressPointView._fields


def _point_view(p: ProgressPoint) -> ProgressPointView:
    """ProgressPointView(p.time, p.step, p.total, finite_or_none(p.loss), p.epoch), by one C call."""
    loss = p[3]
    if loss is None or isfinite(loss):
        return _new_tuple(ProgressPointView, p[:5])
    return _new_tuple(ProgressPointView, (p[0], p[1], p[2], None, p[4]))


def progress_history_view(job: JobState) -> tuple[ProgressPointView, ...]:
    """The last PROGRESS_POINTS points of the job's progress history, as in its view."""
    return _progress_points(job.interp.progress.history, None, ())[1] if job.interp else ()


# The job's fields the view's rarely changing parts (its scalars, processes, GPUs, exit, phase history
# and events) are made of: compared in one C call per frame (`_settled`, an attrgetter) against the copy the
# kept view holds (a steady job's frame changes none of them).
_SETTLED = ("id", "name", "host", "spec", "launcher", "output_dir", "stall_after_s", "members", "start_ticks",
            "root", "gpus", "exit", "history", "actions", "short_id")
_settled = attrgetter(*_SETTLED)
# The containers the tracker changes in place: copied into the kept tuple, each by its own type.
_COPY_OF = {"members": dict, "start_ticks": dict, "gpus": tuple, "history": list, "actions": list}
_COPIERS = tuple(_COPY_OF.get(name) for name in _SETTLED)


def _settled_copy(job: JobState) -> tuple:
    """`_settled(job)` with the containers the tracker changes in place copied (kept by KeptView)."""
    return tuple(v if copy is None else copy(v) for v, copy in zip(_settled(job), _COPIERS))


class KeptView:
    """A job's last view and what each of its parts was made from (`current_view`)."""

    __slots__ = ("view", "fields", "at", "revision", "verdict", "confidence", "first_seen", "settled", "log_keys",
                 "log_total", "exit", "exit_code", "progress", "points_last", "history_head", "history_last",
                 "text_span", "facts")

    def __init__(self, job: JobState, at: float) -> None:
        self.view = job_view(job, at)
        self.fields = vars(self.view)  # never changed in place: a new view gets a new dict
        self.at = at
        self.revision = job.revision
        self.verdict = job.verdict
        self.confidence = job.verdict.confidence if job.verdict else None  # as judged (the view's is rounded)
        self.first_seen = job.first_seen
        self.settled = _settled_copy(job)
        self.log_keys = tuple(job.logs)
        log = job.primary_log
        self.log_total = log.total_lines if log else 0
        self.exit = job.exit  # (current_view's quick test; the view's exit fields are made from `settled`)
        self.exit_code = _exit_code(job)
        interp = job.interp
        self.progress = _progress_values(interp.progress.current) if interp else None
        history = interp.progress.history if interp else ()
        self.points_last = history[-1] if history else None
        self.history_head = _history_head(job.history)
        self.history_last = job.history[-1] if job.history else None
        self.text_span = _NO_SPAN  # (made at the next age asked)
        self.facts = None  # the multi-host join's run facts, asked by `current_views` (per view made)

    def aged(self, at: float) -> JobView:
        """The view at `at` when nothing but the time moved since the last one (`current_view`)."""
        self.at = at
        if self.history_last is None:
            return self.view
        text = self._aged_text(at)
        if text is None:
            return self.view
        fields = self.fields.copy()
        fields["history_text"] = text
        view = object.__new__(JobView)
        _set(view, "__dict__", fields)
        self.view = view
        self.fields = fields
        return view

    def _aged_text(self, at: float) -> str | None:
        """The history text at `at`, or None where it reads as the view's. Only the last phase ages,
        and its age reads the same across a span of ages (`fmt_duration_span`): within the span of the
        age the text was last made at, nothing is made."""
        phase, since = self.history_last
        age = at - since
        low, high = self.text_span
        if low <= age < high:
            return None
        self.text_span = fmt_duration_span(age)
        text = f"{self.history_head}{phase} {fmt_duration(age)}"
        return None if text == self.fields["history_text"] else text

    def refresh(self, job: JobState, at: float) -> JobView:
        """The view at `at`: the last one if no part changed, else a new one sharing the parts that held."""
        fields = self.fields.copy()  # the next view's, each part that changed replaced (dropped if none did)
        changed = False
        v = job.verdict
        if v is not self.verdict or (v is None and job.first_seen != self.first_seen):
            changed = True
            if v is None:
                fields.update(_verdict_fields(job, v))
                self.confidence = None
            else:  # (inline: a verdict is new on most frames, as the ages in its evidence move)
                was = self.verdict  # (None: the view's fields are `_verdict_fields(job, None)`'s)
                if (was is None or v.phase != was.phase or v.detail != was.detail or v.since != was.since
                        or v.advice != was.advice or v.actions != was.actions):
                    fields["phase"] = v.phase
                    fields["detail"] = v.detail
                    fields["since"] = v.since
                    fields["advice"] = v.advice
                    actions = v.actions
                    fields["actions"] = actions if actions.__class__ is tuple else tuple(actions)
                if v.confidence != self.confidence:
                    self.confidence = v.confidence
                    fields["confidence"] = round(v.confidence, 2)
                evidence = v.evidence
                fields["evidence"] = evidence if evidence.__class__ is tuple else tuple(evidence)
            self.verdict = v
            self.first_seen = job.first_seen
        if _settled(job) != self.settled:  # (the usual frame: equal, each part made as it was)
            changed = True
            fields.update(zip(_SCALARS, _scalars(job)))
            fields.update(_process_fields(job))
            fields["gpus"] = tuple(job.gpus)
            fields.update(_exit_fields(job))
            self.exit_code = fields["exit_code"]
            history = job.history
            fields["history"] = tuple(PhaseEntry(phase, since) for phase, since in history)
            self.history_head = _history_head(history)
            self.history_last = history[-1] if history else None
            self.text_span = _NO_SPAN
            fields["events"] = events_text(job.actions)
            self.settled = _settled_copy(job)
        elif job.exit is not None and _exit_code(job) != self.exit_code:  # (the log can name it later)
            changed = True
            fields.update(_exit_fields(job))
            self.exit_code = fields["exit_code"]
        logs = job.logs
        log_keys = tuple(logs)
        if log_keys != self.log_keys:
            changed = True
            fields.update(_log_fields(job))
            self.log_keys = log_keys
            self.log_total = fields["log_lines"]
        elif log_keys:
            total = logs[log_keys[0]].total_lines
            if total != self.log_total:
                changed = True
                fields["log_lines"] = self.log_total = total
        interp = job.interp
        if interp is None:
            if self.progress is not None:
                changed = True
                fields["progress"] = _NO_PROGRESS
                fields["progress_history"] = ()
                self.progress = self.points_last = None
        else:
            tracker = interp.progress
            current = tracker.current
            raw = _progress_values(current)
            if raw != self.progress:
                changed = True
                fields["progress"] = _next_progress_view(raw, self.progress, fields["progress"])
                self.progress = raw
            points = tracker.history
            last = points[-1] if points else None
            if last is not self.points_last:
                changed = True
                self.points_last, fields["progress_history"] = _progress_points(
                    points, self.points_last, fields["progress_history"])
        leftovers = _leftovers(job)
        if leftovers is not fields["leftovers"]:
            changed = True
            fields["leftovers"] = leftovers
        history = job.history
        if history:
            text = self._aged_text(at)  # (a new history left no span: made at once)
            if text is not None:
                changed = True
                fields["history_text"] = text
        elif fields["history_text"]:
            changed = True
            fields["history_text"] = ""
        provisional = provisional_why(job)  # (its samples or verdict moved with the revision)
        if provisional != fields["provisional"]:
            changed = True
            fields["provisional"] = provisional
        self.revision = job.revision
        self.exit = job.exit
        self.at = at
        self.facts = None  # (asked again for the new revision)
        if not changed:
            return self.view
        view = _new_object(JobView)
        _set(view, "__dict__", fields)  # the instance dict JobView(**fields) would fill, in one step
        self.view = view
        self.fields = fields
        return view


_NO_SPAN = (math.inf, -math.inf)  # no age inside: the next age asked makes the text


def _history_head(history: list) -> str:
    """The history text of every phase but the last (those have ended: their text holds still)."""
    head = format_history(history[:-1], history[-1][1]) if len(history) > 1 else ""
    return head + " -> " if head else ""

"""Read a job's log lines in order and keep what they say: the phase the log announces, training
progress, and failures (tracebacks, OOM, NCCL timeouts, dead workers, exit codes)."""

from __future__ import annotations

import dataclasses
import re
import signal as _signal
from dataclasses import dataclass, field
from typing import NamedTuple

from .progress import ProgressTracker, parse_number
from .restart_marker import RestartMarker, parse_marker
from .rules import LineMatch, LineTemplate, RuleSet

_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")
_EXCEPTION_LINE = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*)(?::\s*(?P<msg>.*))?$")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# Details that say more than "an exception happened": preferred as the verdict's detail.
SPECIFIC_FAILURES = ("oom", "cuda-error", "nccl-timeout", "nccl-error", "worker-died", "collective-error", "segfault",
                     "killed", "signal")
MAX_TRACEBACK_LINES = 400
# The rule of a failure read from a launcher's report of a child's end (exitcode -9, Signal 9 (SIGKILL)):
# it names the crash only when it is the root cause (not a rank the launcher SIGTERMed after another failed).
LAUNCHER_REPORT = "launcher-report"
# Another rank may log a step already in flight right after a rank dies; only progress this long
# after an error shows the error was survived.
RECOVERY_S = 20.0
RECOVERY_STEPS = 3
_new = tuple.__new__  # a NamedTuple made without its __new__'s Python call
ESCAPED_CR = "#015"


class PhaseHint(NamedTuple):
    """The phase the log last announced. Made for nearly every line: as a tuple, made by one C call
    (`_new`), it costs ~1/5 of a frozen dataclass, which set its fields one by one."""

    phase: str
    detail: str | None
    rule: str
    time: float  # when the line arrived
    since: float  # when this run of the same phase began in the log
    seq: int
    text: str


@dataclass
class Failure:
    detail: str  # oom, cuda-error, nccl-timeout, nccl-error, worker-died, child-failed, exception, ...
    summary: str  # "ValueError: boom", or the error line
    time: float
    seq: int
    rank: int | None = None
    rule: str | None = None


@dataclass
class _OpenTraceback:
    start_seq: int
    time: float
    lines: int = 0


@dataclass
class LogInterpreter:
    rules: RuleSet
    progress: ProgressTracker = field(default_factory=ProgressTracker)
    hint: PhaseHint | None = None
    failures: list[Failure] = field(default_factory=list)  # since the last sign of progress
    finished_at: float | None = None
    finished_text: str | None = None
    finished_seq: int | None = None
    exit_code: int | None = None  # from the log (torchrun's root cause, launchers)
    exit_rank: int | None = None
    signal: str | None = None
    phase_progress: dict[str, str] = field(default_factory=dict)  # e.g. loading bar numbers
    phase_progress_phase: str | None = None
    seq: int = 0
    last_progress_seq: int = 0
    last_progress_at: float | None = None
    _last: tuple | None = None  # the last matched line: (its LineMatch or shape template, its text)
    restart_marker: RestartMarker | None = None  # a gpuwatch restart's marker line (restart_marker.py)
    _open: dict = field(default_factory=dict)  # rank -> _OpenTraceback
    _in_root_cause: bool = False
    _last_live: str = ""
    _advances_after_failure: int = 0
    _finished_step: float | None = None  # the training step when the completion line came
    shutdown_lines: int = 0  # complete lines a launcher wrote while tearing the job down (event "shutdown")
    # The start of the run this interpreter reads for (host clock): a restart marker dated before it ends the
    # old run's part of a shared log, whose lines then say nothing about this run.
    run_started_at: float | None = None

    # -- feeding -------------------------------------------------------------------
    def feed_line(self, text: str, now: float) -> LineMatch:
        """One complete line; returns what the rules made of it."""
        m = self._line(text, now)
        return m.fill(text)

    def feed_lines(self, texts: list[str], now: float) -> None:
        """Complete lines in order, as `feed_line` each (what the rules made of them is not built)."""
        for text in texts:
            self._line(text, now)

    def _line(self, text: str, now: float) -> LineMatch | LineTemplate:
        self.seq += 1
        if ESCAPED_CR in text:
            text = last_frame(text)
        if text.startswith("=== gpuwatch: "):
            marker = parse_marker(text)
            if marker is not None and self.run_started_at is not None and marker.when <= self.run_started_at:
                self._forget_earlier_run()
            self.restart_marker = marker or self.restart_marker
        # A line of a known shape with no event, outside a traceback (most lines of a training log),
        # is read from its shape's template: no search, no LineMatch.
        m = self.rules.template(text) if not self._open else None
        if m is None or m.events:
            m = self.rules.match(text)
            self._track_traceback(text, m, now)
        self._apply(m, text, now, complete=True)
        return m

    def _forget_earlier_run(self) -> None:
        """Everything read so far belongs to the run a restart ended: a restarted run starts with no phase,
        progress or failure of its own (its model init reads as starting/loading, not the old run's training)."""
        fresh = LogInterpreter(self.rules)
        for f in dataclasses.fields(self):
            if f.name not in ("rules", "seq", "run_started_at", "shutdown_lines"):
                setattr(self, f.name, getattr(fresh, f.name))

    def feed_live(self, text: str, now: float) -> None:
        """The latest frame of an unterminated line (a progress bar): progress and phase only."""
        if not text or text == self._last_live:
            return
        self._last_live = text
        if ESCAPED_CR in text:
            text = last_frame(text)
        m = self.rules.template(text) or self.rules.match(text)
        self._apply(m, text, now, complete=False)

    def _apply(self, m: LineMatch | LineTemplate, text: str, now: float, complete: bool) -> None:
        """A line's facts: `m` is its LineMatch, or its shape's template (`text` then gives the values)."""
        if m.empty:
            return
        self._last = (m, text)
        if m.progress and self.progress.merge(m.progress_of(text), now):
            self.last_progress_seq = self.seq
            self.last_progress_at = now
            if self.finished_at is not None and complete and self._finished_step is not None:
                step = self.progress.current.step
                if step is not None and step > self._finished_step:
                    # Training went on past a completion line: it closed a stage (an epoch), not the run.
                    self.finished_at = self.finished_text = self.finished_seq = self._finished_step = None
            if complete and self.failures:
                self._advances_after_failure += 1
                # Work went on well after the error (in time, or in steps for backlog read at once).
                if now - self.failures[-1].time >= RECOVERY_S or self._advances_after_failure >= RECOVERY_STEPS:
                    self.failures.clear()
        if m.phase_progress:
            self.phase_progress = m.phase_progress_of(text)
            self.phase_progress_phase = m.phase
        if m.phase and not (m.phase == "training" and self.phase_progress_phase == "evaluating"
                            and self._bar_counts_validation(m, text)):
            since = now
            if self.hint is not None and self.hint.phase == m.phase:
                since = self.hint.since
            self.hint = _new(PhaseHint, (m.phase, m.detail, m.rule or "", now, since, self.seq, text[:300]))
        if not complete:
            return
        if m.events:
            m = m.fill(text)
            for event, detail, rule in m.events:
                if event == "error":
                    self._add_failure(Failure(detail or "error", _summary(text), now, self.seq,
                                              _rank(text, m), rule))
                elif event == "finished":
                    self.finished_at = now
                    self.finished_text = _summary(text, 300)
                    self.finished_seq = self.seq
                    self._finished_step = self.progress.current.step
                elif event == "exit-code":
                    self._exit_code(m, text, now)
                elif event == "shutdown":
                    self.shutdown_lines += 1
                elif event == "signal":
                    self.signal = m.fields.get("msg") or signal_name(m.fields.get("signal"))
                    self._add_failure(Failure(_signal_detail(m.fields.get("signal")), _summary(text), now, self.seq,
                                              _rank(text, m), LAUNCHER_REPORT))
        if "Root Cause (first observed failure)" in text:
            self._in_root_cause = True

    def _bar_counts_validation(self, m: LineMatch | LineTemplate, text: str) -> bool:
        """Whether a training bar's frame, drawn while a validation bar runs, is counting the validation's
        batches: Lightning 1.x's epoch bar has train + validation batches as its total and moves on through
        validation, its frames interleaved with the validation bar's. Then it is still evaluating: the
        epoch bar has fewer steps left than the validation bar's total (none left: validation is over)."""
        hint = self.hint
        if hint is None or hint.phase != "evaluating" or not m.progress:
            return False
        line = m.progress_of(text)
        eval_total = parse_number(self.phase_progress.get("total"))
        if not line.is_bar or line.step is None or not line.total or not eval_total:
            return False
        return 0 < line.total - line.step < eval_total

    def _exit_code(self, m: LineMatch, text: str, now: float) -> None:
        try:
            code = int(m.fields.get("exit_code", ""))
        except ValueError:
            return
        if code < 0:  # a launcher's report of a child ended by a signal (subprocess convention: -9 is SIGKILL)
            self._add_failure(Failure(_signal_detail(-code), f"{_summary(text)} ({signal_name(-code)})", now,
                                      self.seq, _rank(text, m), LAUNCHER_REPORT))
        # torchrun lists every failed rank; the root cause block names the one that started it.
        if self._in_root_cause or self.exit_code is None:
            self.exit_code = code
            rank = m.fields.get("rank")
            self.exit_rank = int(rank) if rank and rank.isdigit() else self.exit_rank
            self._in_root_cause = False

    # -- tracebacks -----------------------------------------------------------------
    def _track_traceback(self, text: str, m: LineMatch, now: float) -> None:
        if not self._open and not m.events:
            return  # no traceback open nor starting here: nothing to follow (most lines)
        prefix = _RANK_PREFIX.match(text)
        rank = int(prefix.group(1)) if prefix else None
        body = text[prefix.end():] if prefix else text
        if any(e[0] == "traceback" for e in m.events):
            if rank not in self._open:
                self._open[rank] = _OpenTraceback(self.seq, now)
            return
        tb = self._open.get(rank)
        if tb is None:
            return
        tb.lines += 1
        if tb.lines > MAX_TRACEBACK_LINES:
            del self._open[rank]
            return
        stripped = body.strip()
        if not stripped or body[:1] in (" ", "\t", "^", "~") or stripped.startswith(_CHAINED):
            return
        exc = _EXCEPTION_LINE.match(stripped)
        if exc is None:
            return  # a stray line from another writer interleaved with the traceback
        del self._open[rank]
        name = exc.group("exc")
        specific = next((d for e, d, _ in m.events if e == "error" and d), None)
        if specific is None:
            specific = "interrupted" if name.endswith("KeyboardInterrupt") else "exception"
        if not any(f.seq == self.seq for f in self.failures):
            self._add_failure(Failure(specific, _summary(stripped), now, self.seq, rank, "traceback"))

    def _add_failure(self, failure: Failure) -> None:
        self._advances_after_failure = 0
        if len(self.failures) < 50:
            self.failures.append(failure)

    # -- reading --------------------------------------------------------------------
    @property
    def last_match(self) -> LineMatch | None:
        """What the rules made of the last line they matched."""
        if self._last is None:
            return None
        m, text = self._last
        return m.fill(text)

    @property
    def failure(self) -> Failure | None:
        """The failure to report: the first specific one (OOM, NCCL, a segfault...), else a signal when the
        launcher's root cause is one (not a rank it SIGTERMed after another rank failed), else the first."""
        if not self.failures:
            return None
        for f in self.failures:
            if f.detail in SPECIFIC_FAILURES and f.rule != LAUNCHER_REPORT:
                return f
        code = self.exit_code
        if code is None or code < 0:
            reported = [f for f in self.failures if f.rule == LAUNCHER_REPORT]
            if reported:
                root = _signal_detail(-code) if code is not None else None
                return next((f for f in reported if f.detail == root), reported[0])
        return self.failures[0]

    @property
    def in_traceback(self) -> bool:
        return bool(self._open)


def last_frame(text: str) -> str:
    """The last frame of a line whose carriage returns a log collector wrote as "#015" (syslog's escape,
    SageMaker's MPI capture): what a terminal would show. Frames of only whitespace and escaped cursor
    moves (a nested bar's "#033[A") are skipped."""
    frames = text.split(ESCAPED_CR)
    for frame in reversed(frames):
        if frame.replace("#033[A", "").strip():
            return frame
    return frames[-1]


def _signal_detail(number: str | int | None) -> str:
    """The crash reason of a child ended by this signal: SIGKILL (the OOM killer, kill -9) "killed",
    SIGSEGV "segfault", any other "signal"."""
    try:
        signum = int(number)
    except (TypeError, ValueError):
        return "signal"
    return "killed" if signum == _signal.SIGKILL else "segfault" if signum == _signal.SIGSEGV else "signal"


def signal_name(number: str | int | None) -> str:
    """"SIGKILL" for 9 (or "9"); "signal N" for a number this platform does not name; "?" for none."""
    if number is None:
        return "?"
    try:
        return _signal.Signals(int(number)).name
    except (TypeError, ValueError):
        return f"signal {number}"


def _summary(text: str, limit: int = 160) -> str:
    text = _RANK_PREFIX.sub("", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rank(text: str, m: LineMatch) -> int | None:
    prefix = _RANK_PREFIX.match(text)
    if prefix:
        return int(prefix.group(1))
    rank = m.fields.get("rank")
    return int(rank) if rank and rank.isdigit() else None

"""A loaded recording indexed by time: what every view showed at any recorded instant.

`Timeline` answers "at time T" questions (jobs, log lines, processes, output dirs); `Replay` keeps
a real Store in step with a cursor (forward steps apply only the new samples; a step back rebuilds
the last `history` samples), so the dashboard reads exactly the structures the live core builds.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from pathlib import Path

from ..model import DirStat, ProcInfo
from ..store import HostRecord, Store
from ..views import JobView
from . import format as fmt
from .files import Loaded, read_recording

LOG_LIMIT = 10_000  # lines kept per job, like the live core's bound


def _at(entries: list[tuple], t: float):
    """The last entry whose time is <= t, or None."""
    i = bisect.bisect_right(entries, t, key=lambda e: e[0])
    return entries[i - 1] if i else None


class Timeline:
    def __init__(self, loaded: Loaded) -> None:
        self.header = loaded.header
        self.damage = loaded.damage
        self.hosts: list[str] = list(loaded.header["hosts"])
        self.gpu_columns = fmt.gpu_columns(loaded.header)
        settings = loaded.header.get("settings") or {}
        self.sample_interval = float(settings.get("sample_interval") or 1.0)
        self.history = int(settings.get("history") or 120)  # GPU samples the recorded dashboard kept
        self.ticks: list[float] = []
        self.pdefs: dict[str, dict] = {}
        self.states: dict[str, list[tuple[float, dict]]] = {h: [] for h in self.hosts}
        # host -> [(shown from: the sample's time, or the tick that wrote it if earlier; sample JSON; GPU facts then)]
        self.samples: dict[str, list[tuple[float, dict, dict]]] = {h: [] for h in self.hosts}
        self._last_frame_t: dict[str, float] = {}  # per host: the newest frame's own time
        self.jobs: dict[str, list[tuple[float, dict | None]]] = {}
        self.logs: dict[str, list[tuple[float, list[str], int, bool]]] = {}
        self.jprocs: dict[str, list[tuple[float, list]]] = {}
        self.outdirs: dict[str, list[tuple[float, dict | None]]] = {}
        self.phase_changes: list[tuple[float, str, str]] = []  # (first tick showing it, job id, phase)
        self._views: dict[tuple[str, int], JobView] = {}
        self._points: dict[str, list[dict]] = {}  # job -> every progress point seen, in order
        gfacts: dict[str, dict[int, dict]] = {h: {} for h in self.hosts}
        phases: dict[str, str | None] = {}
        for line in loaded.lines:
            self._index(line, gfacts, phases)

    @classmethod
    def open(cls, path: Path | str) -> Timeline:
        return cls(read_recording(path))

    def _index(self, line: dict, gfacts: dict[str, dict[int, dict]], phases: dict[str, str | None]) -> None:
        t = float(line["t"])
        if self.ticks and t < self.ticks[-1]:
            t = self.ticks[-1]  # a clock step back on the recording machine: keep time monotonic
        after_last_tick = math.nextafter(self.ticks[-1], math.inf) if self.ticks else -math.inf
        self.ticks.append(t)
        self.pdefs.update(line.get("pdefs") or {})
        for host, state in (line.get("states") or {}).items():
            self._host(host)
            self.states[host].append((t, state))
        for host, samples in (line.get("samples") or {}).items():
            self._host(host)
            facts = gfacts.setdefault(host, {})
            for sample in samples:
                if sample.get("gfacts"):
                    facts = dict(facts)
                    facts.update({int(k): v for k, v in sample["gfacts"].items()})
                    gfacts[host] = facts
                entries = self.samples[host]
                at = float(sample["t"])
                if at <= self._last_frame_t.get(host, float("-inf")):
                    continue  # the same frame seen twice
                self._last_frame_t[host] = at
                # Shown from its own time, kept within the ticks around the line that wrote it: the live
                # view at this tick had it, even when its time (the host's clock, corrected by an estimated
                # offset) is a few ms past the tick's; the live view at the tick before did not, even when
                # the probe stamped it just before that tick and it arrived after.
                entries.append((min(max(at, after_last_tick), t), sample, facts))
        histories = line.get("phist") or {}
        changed = {job["id"]: job for job in line.get("jobs") or ()}
        for job_id in set(changed) | set(histories):
            entries = self.jobs.setdefault(job_id, [])
            before = entries[-1][1] if entries and entries[-1][1] is not None else None
            job = dict(before or {}, **changed.get(job_id, {}))  # a delta names only what changed
            points = self._points.setdefault(job_id, [])
            lo, hi = job.pop("_window", (len(points), len(points)))
            if before is None:
                lo = hi = len(points)  # a new job (or one back after it was dropped): a fresh window
            if job_id in histories:
                drop, add = histories[job_id]
                points.extend(add)
                lo, hi = min(lo + int(drop), hi), len(points)
            job["_window"] = (lo, hi)
            entries.append((t, job))
            phase = job.get("phase")
            if phases.get(job_id) != phase:
                phases[job_id] = phase
                self.phase_changes.append((t, job_id, phase))
        for job_id in line.get("gone") or ():
            self.jobs.setdefault(job_id, []).append((t, None))
            phases.pop(job_id, None)
        for job_id, log in (line.get("logs") or {}).items():
            self.logs.setdefault(job_id, []).append((t, list(log.get("lines") or ()), int(log.get("total", 0)),
                                                     bool(log.get("reset"))))
        for job_id, rows in (line.get("jprocs") or {}).items():
            self.jprocs.setdefault(job_id, []).append((t, rows))
        for job_id, stat in (line.get("outdirs") or {}).items():
            self.outdirs.setdefault(job_id, []).append((t, stat))

    def _host(self, host: str) -> None:
        if host not in self.states:  # a host the header did not list: show it rather than fail
            self.hosts.append(host)
            self.states[host] = []
            self.samples[host] = []

    # -- extent ----------------------------------------------------------------------------
    @property
    def start(self) -> float:
        return self.ticks[0] if self.ticks else float(self.header.get("started") or 0.0)

    @property
    def end(self) -> float:
        return self.ticks[-1] if self.ticks else self.start

    # -- at time t -------------------------------------------------------------------------
    def jobs_at(self, t: float) -> list[JobView]:
        out = []
        for job_id, entries in self.jobs.items():
            i = bisect.bisect_right(entries, t, key=lambda e: e[0])
            if not i or entries[i - 1][1] is None:
                continue
            view = self._views.get((job_id, i))
            if view is None:
                data = dict(entries[i - 1][1])
                lo, hi = data.pop("_window")
                data["progress_history"] = self._points.get(job_id, [])[lo:hi]
                view = self._views[(job_id, i)] = JobView.from_json(data)
            out.append(view)
        return out

    def log_at(self, job_id: str, t: float, limit: int = LOG_LIMIT) -> tuple[list[str], int]:
        """(the last `limit` lines as they had arrived by t, lines ever seen by t)."""
        entries = self.logs.get(job_id, ())
        end = bisect.bisect_right(entries, t, key=lambda e: e[0])
        lines: deque[str] = deque(maxlen=limit)
        total = 0
        for i in range(end):
            _, new, total, reset = entries[i]
            if reset:
                lines.clear()
            lines.extend(new)
        return list(lines), total

    def procs_at(self, job_id: str, t: float) -> list[ProcInfo]:
        entry = _at(self.jprocs.get(job_id, []), t)
        return [] if entry is None else self._procs(entry[1])

    def outdir_at(self, job_id: str, t: float) -> DirStat | None:
        entry = _at(self.outdirs.get(job_id, []), t)
        return None if entry is None else fmt.dirstat_from_json(entry[1])

    def _procs(self, rows: list) -> list[ProcInfo]:
        out = []
        for row in rows:
            static = self.pdefs.get(row[0])
            if static is not None:  # a definition lost to damage: leave that process out
                out.append(fmt.proc_from_row(row, static))
        return out

    def sample(self, host: str, index: int):
        at, data, facts = self.samples[host][index]
        procs = {p.pid: p for p in self._procs(data.get("procs") or ())}
        return fmt.sample_from_json(data, facts, procs, self.gpu_columns)

    def next_phase_change(self, t: float) -> float | None:
        later = [c for c, _, _ in self.phase_changes if c > t + 1e-6]
        return min(later) if later else None

    def previous_phase_change(self, t: float) -> float | None:
        earlier = [c for c, _, _ in self.phase_changes if c < t - 1e-6]
        return max(earlier) if earlier else None


class Replay:
    """A cursor over a Timeline and a Store kept in step with it."""

    def __init__(self, timeline: Timeline, history: int = 120) -> None:
        self.timeline = timeline
        self.store = Store(list(timeline.hosts), history)
        self.cursor = timeline.start
        self._applied: dict[str, int] = {h: 0 for h in timeline.hosts}  # samples applied per host
        self._rebuild(self.cursor)

    def seek(self, t: float) -> float:
        """Move to t (clamped to the recording); returns where the cursor is."""
        t = min(max(t, self.timeline.start), self.timeline.end)
        if t >= self.cursor:
            self._forward(t)
        else:
            self._rebuild(t)
        self.cursor = t
        self._states(t)
        return t

    def _rebuild(self, t: float) -> None:
        for name in self.timeline.hosts:
            self.store.hosts[name] = HostRecord(name)
            entries = self.timeline.samples[name]
            end = bisect.bisect_right(entries, t, key=lambda e: e[0])
            # One sample before the history window, so process CPU % has a reading to compare with.
            for i in range(max(0, end - self.store.history - 1), end):
                self.store.apply_sample(name, self.timeline.sample(name, i))
            self._applied[name] = end
        self.cursor = t
        self._states(t)

    def _forward(self, t: float) -> None:
        pending = []
        for name in self.timeline.hosts:
            entries = self.timeline.samples[name]
            end = bisect.bisect_right(entries, t, key=lambda e: e[0])
            start = max(self._applied[name], end - self.store.history - 1)
            pending += [(entries[i][0], name, i) for i in range(start, end)]
            self._applied[name] = end
        for _, name, i in sorted(pending):
            self.store.apply_sample(name, self.timeline.sample(name, i))

    def _states(self, t: float) -> None:
        for name in self.timeline.hosts:
            entry = _at(self.timeline.states[name], t)
            state = entry[1] if entry else {"state": "connecting"}
            rec = self.store.hosts[name]
            rec.state = state.get("state") or "connecting"
            rec.error, rec.hint = state.get("error"), state.get("hint")
            rec.retry_at = state.get("retry_at")
            rec.reconnects = int(state.get("reconnects") or 0)
        self.store.generation += 1

    # -- the parts of the live core the report and the dashboard read ----------------------
    def jobs(self) -> list[JobView]:
        return self.timeline.jobs_at(self.cursor)


class ReplayTracker:
    """The tracker's read side over a Replay (what incident_report reads)."""

    def __init__(self, replay: Replay) -> None:
        self._replay = replay

    def views(self, now: float | None = None) -> list[JobView]:
        return self._replay.jobs()

    def log_lines(self, job_id: str, n: int | None = None) -> list[str]:
        lines, _ = self._replay.timeline.log_at(job_id, self._replay.cursor)
        return lines[-n:] if n else lines

    def log_total(self, job_id: str) -> int:
        return self._replay.timeline.log_at(job_id, self._replay.cursor)[1]

    def procs(self, job_id: str) -> list[ProcInfo]:
        return self._replay.timeline.procs_at(job_id, self._replay.cursor)

    def outdir(self, job_id: str) -> DirStat | None:
        return self._replay.timeline.outdir_at(job_id, self._replay.cursor)


class ReplayMonitor:
    """A Monitor's read side at one recorded instant: `store`, `tracker`, no sessions to act on."""

    def __init__(self, replay: Replay) -> None:
        self.store = replay.store
        self.tracker = ReplayTracker(replay)
        self.sessions: dict = {}

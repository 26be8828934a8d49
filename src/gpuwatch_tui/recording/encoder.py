"""Turns what the core knows, tick by tick, into recording lines that hold only what changed.

The encoder does no I/O and knows no Monitor: the live recorder and the converter of old
`watch --json` files both feed it plain values (see format.py for the line's shape).
"""

from __future__ import annotations

from ..model import DirStat, HostSample, ProcInfo
from . import format as fmt


def window_delta(old: list, new: list) -> list:
    """[points dropped from the front of `old`, points appended] turning `old` into `new`: a progress
    history is a sliding window, so each tick costs its new points only."""
    if new and old:
        start = 0
        while True:
            try:
                start = old.index(new[0], start)
            except ValueError:
                break
            kept = len(old) - start
            if old[start:] == new[:kept]:
                return [start, new[kept:]]
            start += 1
    return [len(old), list(new)]


class TickEncoder:
    def __init__(self) -> None:
        self._states: dict[str, dict] = {}
        self._gfacts: dict[str, dict[int, dict]] = {}
        self._pdefs: dict[str, dict] = {}  # process key -> static facts written
        self._pkeys: dict[tuple[int, int], str] = {}  # (pid, start ticks) -> its current key
        self._jobs: dict[str, dict] = {}
        self._phist: dict[str, list] = {}  # job -> its progress history as last written
        self._log_totals: dict[str, int] = {}
        self._jprocs: dict[str, list] = {}
        self._outdirs: dict[str, dict | None] = {}
        self._pending_samples: dict[str, list[dict]] = {}
        self._pending_pdefs: dict[str, dict] = {}

    # -- samples arrive between ticks; every one is kept ------------------------------------
    def _proc_key(self, info: ProcInfo) -> str:
        static = fmt.proc_static(info)
        ident = (info.pid, info.start_ticks or int(info.start_time * 100))
        key = self._pkeys.get(ident)
        if key is not None and self._pdefs.get(key) == static:
            return key
        n = 0 if key is None else int(key.rsplit(".", 1)[1]) + 1
        key = f"{ident[0]}.{ident[1]}.{n}"
        self._pkeys[ident] = key
        self._pdefs[key] = static
        self._pending_pdefs[key] = static
        return key

    def _proc_rows(self, procs) -> list[list]:
        return [fmt.proc_row(self._proc_key(p), p) for p in procs]

    def sample(self, host: str, sample: HostSample) -> None:
        out: dict = {"t": sample.time, "src": sample.gpu_source,
                     "gpus": [fmt.gpu_row(g) for g in sample.gpus]}
        if sample.gpu_error:
            out["gerr"] = sample.gpu_error
        for key in fmt.HOST_FACTS:
            value = getattr(sample, key)
            if value is not None:
                out[key] = value
        known = self._gfacts.setdefault(host, {})
        changed = {}
        for gpu in sample.gpus:
            facts = fmt.gpu_facts(gpu)
            if known.get(gpu.index) != facts:
                known[gpu.index] = changed[str(gpu.index)] = facts
        if changed:
            out["gfacts"] = changed
        if sample.procs:
            out["procs"] = self._proc_rows(sample.procs.values())
        self._pending_samples.setdefault(host, []).append(out)

    # -- one line per tick -----------------------------------------------------------------
    def tick(self, t: float, states: dict[str, dict], jobs: list[dict],
             logs: dict[str, tuple[list[str], int]], jprocs: dict[str, list[ProcInfo]],
             outdirs: dict[str, DirStat | None]) -> dict:
        line: dict = {"t": t}
        changed_states = {}
        for host, state in states.items():
            state = {k: state.get(k) for k in fmt.STATE_KEYS}
            if self._states.get(host) != state:
                self._states[host] = changed_states[host] = state
        if changed_states:
            line["states"] = changed_states
        if self._pending_samples:
            line["samples"], self._pending_samples = self._pending_samples, {}
        current = {}
        changed_jobs = []
        histories = {}
        for job in jobs:
            job = dict(job)
            points = job.pop("progress_history", None) or []
            before = self._jobs.get(job["id"])
            current[job["id"]] = job
            if before is None:
                changed_jobs.append(job)
                self._phist[job["id"]] = []
            elif before != job:  # only the fields that changed (the id says whose)
                changed_jobs.append({"id": job["id"], **{k: v for k, v in job.items() if before.get(k) != v}})
            old = self._phist.get(job["id"], [])
            if points != old:
                histories[job["id"]] = window_delta(old, points)
                self._phist[job["id"]] = points
        gone = [job_id for job_id in self._jobs if job_id not in current]
        self._jobs = current
        if changed_jobs:
            line["jobs"] = changed_jobs
        if histories:
            line["phist"] = histories
        if gone:
            line["gone"] = gone
            for job_id in gone:
                for table in (self._log_totals, self._jprocs, self._outdirs, self._phist):
                    table.pop(job_id, None)
        new_logs = {}
        for job_id, (tail, total) in logs.items():
            before = self._log_totals.get(job_id, 0)
            if total == before:
                continue
            entry: dict = {"total": total}
            if total < before:  # the log started over (truncated, rotated, a restart)
                entry["reset"] = True
                new = total
            else:
                new = total - before
            entry["lines"] = list(tail[-new:]) if new and tail else []
            self._log_totals[job_id] = total
            new_logs[job_id] = entry
        if new_logs:
            line["logs"] = new_logs
        changed_procs = {}
        for job_id, procs in jprocs.items():
            rows = self._proc_rows(procs)
            if self._jprocs.get(job_id) != rows:
                self._jprocs[job_id] = changed_procs[job_id] = rows
        if changed_procs:
            line["jprocs"] = changed_procs
        changed_dirs = {}
        for job_id, stat in outdirs.items():
            data = fmt.dirstat_json(stat)
            if job_id not in self._outdirs or self._outdirs[job_id] != data:
                self._outdirs[job_id] = changed_dirs[job_id] = data
        if changed_dirs:
            line["outdirs"] = changed_dirs
        if self._pending_pdefs:
            line["pdefs"], self._pending_pdefs = self._pending_pdefs, {}
        return line

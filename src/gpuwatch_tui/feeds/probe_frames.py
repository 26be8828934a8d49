"""Probe frames (JSON dicts) -> the typed model. Tolerant of fields a newer probe adds."""

from __future__ import annotations

import binascii
from operator import attrgetter, itemgetter

from ..jobs.grouping_reuse import gpu_pids_key, proc_key
from ..model import (
    ChildProc,
    DirStat,
    ExitInfo,
    FdTarget,
    GpuProcess,
    GpuSample,
    HostSample,
    ProcInfo,
    TailChunk,
    parse_note,
)
from ..probe import gpu_metrics
from ..probe.wire import CHILD_FACTS, GPU_FACTS, ROOT_FACTS, TAIL_KEPT

# The same records, built without the class call's own steps (quick_record).
_ChildProc = ChildProc.make
_FdTarget = FdTarget.make
_GpuProcess = GpuProcess.make
_GpuSample = GpuSample.make
_ProcInfo = ProcInfo.make
_TailChunk = TailChunk.make

_b64decode = binascii.a2b_base64  # base64.b64decode without its checks of the argument's type (a str here)


def _fd(raw: dict | None) -> FdTarget | None:
    if not raw:
        return None
    return _FdTarget(raw.get("path", ""), raw.get("kind", "unknown"), bool(raw.get("append")), raw.get("size"))


def _opt_int(value) -> int | None:
    return None if value is None else int(value)


def _gpu_processes(raw) -> tuple[GpuProcess, ...]:
    return tuple(_GpuProcess(int(p["pid"]), p.get("mem_used_mib"), p.get("sm_pct")) for p in raw)


def parse_gpu(raw: dict) -> GpuSample:
    return _GpuSample(int(raw["index"]), str(raw.get("uuid", "")), str(raw.get("name", "")),
                      *[raw.get(name) for name in gpu_metrics.NAMES],
                      _gpu_processes(raw.get("processes", [])))


# A steady frame's GPU readings (gpu_metrics.READINGS), taken in one C call, and a GPU record made
# again from the last one's facts and new readings: generated from the table, as quick_record makes
# its constructors, because a per-metric loop here would run for every GPU of every host each second.
_frame_readings = itemgetter(*gpu_metrics.READINGS)
_sample_readings = attrgetter(*gpu_metrics.READINGS)


def _readings_rebuilder():
    args = ", ".join("r[%d]" % gpu_metrics.READINGS.index(m.name) if m.kind == gpu_metrics.READING
                     else "prev." + m.name for m in gpu_metrics.METRICS)
    namespace, name = {"_make": _GpuSample}, "with_readings"  # (a name, not a key of the wire)
    exec(f"def {name}(prev, r):\n    return _make(prev.index, prev.uuid, prev.name, {args}, prev.processes)\n",
         namespace)  # noqa: S102 - built only from the metric table's names
    return namespace[name]


_with_readings = _readings_rebuilder()


# A probe that sends fact deltas (its hello says `fact_deltas`) leaves the wire's facts of a process, a GPU
# and a log tail out of a frame while they have not changed (the probe's FrameDeltas), and empty per-frame
# events of a tail (wire.TAIL_EVENTS), which read as empty.
_ROOT_FACTS = frozenset(ROOT_FACTS)
_CHILD_FACTS = frozenset(CHILD_FACTS)
_GPU_FACTS = frozenset(GPU_FACTS)
_MISSING = object()


def _learn(entry: dict, key, names: frozenset, old: dict, new: dict) -> dict:
    """The known facts of one entry after this frame: the last ones with those the frame carries.

    A dict of facts made here is never changed (a change makes a new one), so an object parsed from
    it earlier is still right while the entry's facts are the very same dict. (A log tail's facts,
    from which nothing is kept, are updated in place instead: `_learn_tails`.)"""
    known = new.get(key)  # an entry met twice in one frame (a child under two roots)
    if known is None:
        known = old.get(key)
    present = entry.keys() & names
    if known is None:
        known = {name: entry[name] for name in present}
    elif present:
        for name in present:
            if known.get(name, _MISSING) != entry[name]:
                known = {**known, **{n: entry[n] for n in present}}
                break
    new[key] = known
    return known


class FactCache:
    """The last facts of every process, GPU and log tail of one probe, for a probe that sends them
    only when they change. One per probe run: a new hello starts a new one.

    `parse_sample(frame, cache)` reads a frame as the same `HostSample` a full frame gives. Most of a
    steady frame repeats the last one, so the cache also keeps the objects it parsed last frame and
    reuses them (or their fixed parts) while an entry's facts are unchanged: only the few fields
    that move each second (CPU time, state, RSS, GPU readings, new log bytes) are read again.
    Like the probe, it keeps only the latest frame's entries.
    """

    def __init__(self) -> None:
        self.roots: dict[tuple[int, int], dict] = {}
        self.children: dict[tuple[int, int], dict] = {}
        self.gpus: dict[int, dict] = {}
        self.tails: dict[str, dict] = {}
        # Parsed from the latest frame: key -> (the facts dict it was parsed from, the object[, its grouping key]).
        self._procs: dict = {}
        self._kids: dict = {}
        self._gpus: dict = {}

    def read(self, frame: dict) -> tuple:
        """(procs by pid, their grouping keys, GPUs, their process pids, tails) of a frame.

        Every entry's facts are learned before any is parsed (a frame that fails to parse still
        teaches its facts, as the probe will not send them again); a frame that fails to parse
        makes the next one parse afresh (`forget_parsed`)."""
        raw_procs = frame.get("procs", [])
        old_roots, old_children = self.roots, self.children
        roots: dict = {}
        children: dict = {}
        learned = []
        for raw in raw_procs:
            key = (raw["pid"], raw.get("start_ticks", 0))
            known = old_roots.get(key)
            if known is None or key in roots or not _ROOT_FACTS.isdisjoint(raw):
                known = _learn(raw, key, _ROOT_FACTS, old_roots, roots)
            else:
                roots[key] = known  # the common case: no fact in the frame, none learned anew
            raw_kids = raw.get("children")
            kids: list | None = []
            if raw_kids:
                for child in raw_kids:
                    child_key = (child["pid"], child.get("start_ticks", 0))
                    child_known = old_children.get(child_key)
                    if child_known is None or child_key in children or not _CHILD_FACTS.isdisjoint(child):
                        child_known = _learn(child, child_key, _CHILD_FACTS, old_children, children)
                    else:
                        children[child_key] = child_known
                    kids.append((child, child_key, child_known))
            elif raw_kids is None and "children" in raw:
                kids = None  # refused when parsed, as parse_proc refuses it
            learned.append((raw, key, known, kids))
        gpus_learned, gpus = _learn_each(frame.get("gpus", []), "index", _GPU_FACTS, self.gpus)
        tails_learned, tails = _learn_tails(frame.get("tails", []), self.tails)
        self.roots, self.children, self.gpus, self.tails = roots, children, gpus, tails

        procs, groups = {}, {}
        for raw, key, known, kids in learned:
            info, group = self._proc(raw, key, known, kids)
            procs[info.pid] = info
            groups[info.pid] = group
        samples, pids = self._gpus_of(gpus_learned)
        chunks = [_tail(raw, known) for raw, known in tails_learned]
        # Only the latest frame's entries are kept (every one parsed now has one).
        if len(self._procs) != len(roots):
            self._procs = {k: v for k, v in self._procs.items() if k in roots}
        if len(self._kids) != len(children):
            self._kids = {k: v for k, v in self._kids.items() if k in children}
        if len(self._gpus) != len(gpus):
            self._gpus = {k: v for k, v in self._gpus.items() if k in gpus}
        return procs, tuple(groups.values()), samples, tuple(pids), chunks

    def forget_parsed(self) -> None:
        """A frame failed to parse: parse the next one afresh (its facts stay learned)."""
        self._procs, self._kids, self._gpus = {}, {}, {}

    def _child(self, raw: dict, key, known: dict) -> ChildProc:
        last = self._kids.get(key)
        if last is None or last[0] is not known:
            child = parse_child({**known, **raw})
            self._kids[key] = (known, child)
            return child
        prev = last[1]
        state = str(raw.get("state", ""))
        cpu_s = float(raw.get("cpu_s", 0.0))
        if prev.state == state and prev.cpu_s == cpu_s:
            return prev
        child = _ChildProc(prev.pid, prev.name, prev.cmdline, state, cpu_s, prev.start_ticks, prev.uid, prev.user)
        self._kids[key] = (known, child)
        return child

    def _proc(self, raw: dict, key, known: dict, kids: list | None) -> tuple:
        """A process of a steady frame, and its grouping key: the last frame's record while nothing moved, else
        the last one with the values that moved. A raw value equal to the parsed one parses to that very value
        (a str to itself, a number to the float it equals), so the moving values are compared before they are
        converted (and again after: `2` for `2.0`)."""
        last = self._procs.get(key)
        if last is None or kids is None:
            return self._proc_anew(raw, key, known, kids, last)
        prev, group = last[1], last[2]
        targets_moved = last[0] is not known
        if targets_moved:
            prev = _with_targets(prev, known, last[0])  # the usual change: a log's size moved
            if prev is None:
                return self._proc_anew(raw, key, known, kids, last)
        if kids:
            # The children: the last frame's objects where their facts, state and CPU time are unchanged.
            parsed = []
            last_kids = self._kids
            for child, child_key, child_known in kids:
                last_kid = last_kids.get(child_key)
                if last_kid is not None and last_kid[0] is child_known:
                    kid = last_kid[1]
                    try:
                        if kid.state == child["state"] and kid.cpu_s == child["cpu_s"]:
                            parsed.append(kid)
                            continue
                    except KeyError:
                        pass  # left out: read with its default
                parsed.append(self._child(child, child_key, child_known))
            children = tuple(parsed)
        else:
            children = ()
        if prev.children == children:  # the same child objects (compared by identity first)
            children = prev.children
        try:
            state, cpu_s, cpu_children_s = raw["state"], raw["cpu_s"], raw["cpu_children_s"]
            rss_bytes, threads = raw["rss_bytes"], raw["threads"]
        except KeyError:  # a field left out: read with its default
            state, cpu_s = raw.get("state", ""), raw.get("cpu_s", 0.0)
            cpu_children_s, rss_bytes, threads = raw.get("cpu_children_s", 0.0), raw.get("rss_bytes", 0), raw.get(
                "threads", 0)
        seen = raw["compilers_seen"] if "compilers_seen" in raw else None
        compilers_seen = tuple(str(n) for n in seen) if seen else ()
        moving = (children, state, cpu_s, cpu_children_s, rss_bytes, threads, compilers_seen)
        if _moving_of(prev) == moving:
            info = prev
        else:
            state, cpu_s, cpu_children_s = str(state), float(cpu_s), float(cpu_children_s)
            rss_bytes, threads = int(rss_bytes), int(threads)
            if _moving_of(prev) == (children, state, cpu_s, cpu_children_s, rss_bytes, threads, compilers_seen):
                info = prev
            else:
                info = _ProcInfo(prev.pid, prev.ppid, prev.start_time, prev.name, prev.cmdline, prev.cwd, state,
                                cpu_s, cpu_children_s, rss_bytes, threads, prev.sid, prev.pgid, children,
                                prev.stdout, prev.stderr, prev.unbuffered, prev.unbuffered_reason, prev.is_python,
                                prev.env_readable, prev.start_ticks, prev.uid, prev.user, compilers_seen, prev.dist)
        if targets_moved and _targets_of(prev) != _targets_of(last[1]):
            group = proc_key(info)  # grouping reads a target's path and kind (not its size)
        elif info is prev and not targets_moved:
            return prev, group
        elif info is not prev and (group[3] != (state == "Z") or children is not prev.children and group[-1] != tuple(
                (c.pid, c.start_ticks) for c in children)):
            group = proc_key(info)
        self._procs[key] = (known, info, group)
        return info, group

    def _proc_anew(self, raw: dict, key, known: dict, kids: list | None, last) -> tuple:
        """A process met for the first time, or whose facts changed: parsed in full."""
        if kids is None:
            raise TypeError("a process's children are not a list")  # as parse_proc finds
        children = tuple([self._child(child, child_key, child_known) for child, child_key, child_known in kids])
        info = parse_proc({**known, **raw}, children)
        group = proc_key(info)
        if last is not None and last[2] == group:
            group = last[2]  # (a log's size moved, say): the very same key, compared by identity later
        self._procs[key] = (known, info, group)
        return info, group

    def _gpus_of(self, learned: list) -> tuple[list, tuple]:
        """The GPUs of a frame and the pids on each: the last frame's objects while facts and readings hold."""
        samples = []
        pids = []
        last_gpus = self._gpus
        for raw, index, known in learned:
            last = last_gpus.get(index)
            if last is None or last[0] is not known:
                gpu = parse_gpu({**known, **raw})
                gpu_pids = gpu_pids_key(gpu)
                last_gpus[index] = (known, gpu, gpu_pids, _sample_readings(gpu))
                samples.append(gpu)
                pids.append(gpu_pids)
                continue
            prev, gpu_pids = last[1], last[2]
            try:
                readings = _frame_readings(raw)
            except KeyError:  # a reading left out: None
                readings = tuple([raw.get(name) for name in gpu_metrics.READINGS])
            if readings == last[3]:
                samples.append(prev)
            else:
                gpu = _with_readings(prev, readings)
                last_gpus[index] = (known, gpu, gpu_pids, readings)
                samples.append(gpu)
            pids.append(gpu_pids)
        return samples, tuple(pids)


def _moving_of(proc: ProcInfo) -> tuple:
    """What a steady frame may move of a process: its children and readings."""
    return (proc.children, proc.state, proc.cpu_s, proc.cpu_children_s, proc.rss_bytes, proc.threads,
            proc.compilers_seen)


_FD_FACTS = frozenset(("stdout", "stderr"))


def _with_targets(prev: ProcInfo, known: dict, last_known: dict) -> ProcInfo | None:
    """`prev` with the stdout/stderr of `known`, where every other fact is the very object of `last_known`
    (a fact dict is never changed: `_learn`), else None. A job whose output goes to a file sends its
    target again whenever the file grew (the size is part of it)."""
    if known.keys() != last_known.keys():
        return None
    for name, value in last_known.items():
        if known[name] is not value and name not in _FD_FACTS:
            return None
    return _ProcInfo(prev.pid, prev.ppid, prev.start_time, prev.name, prev.cmdline, prev.cwd, prev.state, prev.cpu_s,
                    prev.cpu_children_s, prev.rss_bytes, prev.threads, prev.sid, prev.pgid, prev.children,
                    _fd(known.get("stdout")), _fd(known.get("stderr")), prev.unbuffered, prev.unbuffered_reason,
                    prev.is_python, prev.env_readable, prev.start_ticks, prev.uid, prev.user, prev.compilers_seen,
                    prev.dist)


def _targets_of(proc: ProcInfo) -> tuple:
    """What grouping reads of a process's stdout and stderr targets: their paths and kinds."""
    out, err = proc.stdout, proc.stderr
    return (None if out is None else (out.path, out.kind)), (None if err is None else (err.path, err.kind))


def _learn_each(entries: list, field: str, names: frozenset, old: dict) -> tuple[list, dict]:
    """[(entry, key, known facts)] of a frame's GPUs or tails (keyed by `field`), and the new facts."""
    new: dict = {}
    out = []
    for entry in entries:
        key = entry[field]
        known = old.get(key)
        if known is None or key in new or not names.isdisjoint(entry):
            known = _learn(entry, key, names, old, new)
        else:
            new[key] = known
        out.append((entry, key, known))
    return out, new


def _learn_tails(entries: list, old: dict) -> tuple[list, dict]:
    """[(entry, known facts)] of a frame's tails, and the new facts. A growing log's size and mtime come in
    every frame and nothing parsed from a tail is kept, so its facts are updated in place."""
    new: dict = {}
    out = []
    for entry in entries:
        key = entry["key"]
        known = new.get(key)
        if known is None:
            known = old.get(key)
            if known is None:
                known = {}
        for name in TAIL_KEPT:
            if name in entry:
                known[name] = entry[name]
        new[key] = known
        out.append((entry, known))
    return out, new


def _tail(raw: dict, known: dict | None = None) -> TailChunk:
    facts = raw if known is None else known
    data = raw.get("data")
    cut = raw.get("cut")
    return _TailChunk(
        str(raw["key"]), str(facts.get("path", "")), _b64decode(data) if data else b"", bool(raw.get("reset")),
        int(raw.get("skipped", 0)), facts.get("size"), facts.get("mtime"), facts.get("error"),
        tuple((int(pos), int(n)) for pos, n in cut) if cut else (),
    )


def parse_child(raw: dict) -> ChildProc:
    return _ChildProc(int(raw["pid"]), str(raw.get("name", "")), tuple(raw.get("cmdline", ())),
                     str(raw.get("state", "")), float(raw.get("cpu_s", 0.0)), int(raw.get("start_ticks", 0)),
                     _opt_int(raw.get("uid")), raw.get("user"))


def parse_dir(d: dict) -> DirStat:
    """A watched output directory's entry (the probe's `dirs`, a recording's `outdirs`)."""
    return DirStat(str(d["key"]), str(d.get("path", "")), bool(d.get("exists")), int(d.get("files", 0)),
                   int(d.get("total_bytes", 0)), d.get("newest_mtime"), d.get("newest_name"), d.get("error"))


def parse_proc(raw: dict, children: tuple[ChildProc, ...] | None = None) -> ProcInfo:
    """One process; `children`: its children already parsed (else read from `raw`)."""
    return _ProcInfo(
        pid=int(raw["pid"]),
        ppid=int(raw.get("ppid", 0)),
        start_time=float(raw.get("start_time", 0.0)),
        name=str(raw.get("name", "")),
        cmdline=tuple(raw.get("cmdline", ())),
        cwd=raw.get("cwd"),
        state=str(raw.get("state", "")),
        cpu_s=float(raw.get("cpu_s", 0.0)),
        cpu_children_s=float(raw.get("cpu_children_s", 0.0)),
        rss_bytes=int(raw.get("rss_bytes", 0)),
        threads=int(raw.get("threads", 0)),
        sid=int(raw.get("sid", 0)),
        pgid=int(raw.get("pgid", 0)),
        children=tuple(parse_child(c) for c in raw.get("children", [])) if children is None else children,
        stdout=_fd(raw.get("stdout")),
        stderr=_fd(raw.get("stderr")),
        unbuffered=bool(raw.get("unbuffered")),
        unbuffered_reason=str(raw.get("unbuffered_reason", "")),
        is_python=bool(raw.get("is_python")),
        env_readable=bool(raw.get("env_readable", True)),
        start_ticks=int(raw.get("start_ticks", 0)),
        uid=_opt_int(raw.get("uid")),
        user=raw.get("user"),
        compilers_seen=tuple(str(n) for n in raw.get("compilers_seen") or ()),
        dist=_dist(raw.get("dist")),
    )


def _dist(raw) -> tuple[tuple[str, str], ...]:
    """The run/rank variables as sorted (name, value) pairs; anything but an object of strings is dropped."""
    if not isinstance(raw, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in raw.items() if isinstance(v, str)))


def parse_sample(frame: dict, facts: FactCache | None = None) -> HostSample:
    """A sample frame as a `HostSample`. `facts`: the cache of a probe that sends fact deltas."""
    if facts is None:
        procs = {}
        for raw in frame.get("procs", []):
            info = parse_proc(raw)
            procs[info.pid] = info
        gpus = [parse_gpu(g) for g in frame.get("gpus", [])]
        tails = [_tail(t) for t in frame.get("tails", [])]
        procs_key = gpus_key = None
    else:
        try:
            procs, procs_key, gpus, gpus_key, tails = facts.read(frame)
        except BaseException:
            facts.forget_parsed()
            raise
    try:
        # (most frames' are empty: no comprehension run for them)
        gone, dirs = frame.get("gone", []), frame.get("dirs", [])
        matches, candidates = frame.get("matches"), frame.get("candidates")
        sample = HostSample(
            time=float(frame.get("t", 0.0)),
            gpu_source=str(frame.get("gpu_source", "none")),
            gpus=gpus,
            procs=procs,
            gone=[ExitInfo(int(g["pid"]), float(g.get("start_time", 0)), float(g.get("seen_gone_at", 0)))
                  for g in gone] if gone != [] else [],
            tails=tails,
            dirs=[parse_dir(d) for d in dirs] if dirs != [] else [],
            gpu_error=frame.get("gpu_error"),
            load1=frame.get("load1"),
            cpu_count=frame.get("cpu_count"),
            cpu_pct=frame.get("cpu_pct"),
            mem_total_kib=frame.get("mem_total_kib"),
            mem_avail_kib=frame.get("mem_avail_kib"),
            driver=frame.get("driver"),
            matches={str(k): [int(p) for p in v] for k, v in matches.items()} if matches else {},
            candidates={int(k): str(v) for k, v in candidates.items()} if candidates else {},
            ml_loaded=frozenset(int(p) for p in frame["ml"]) if frame.get("ml") else frozenset(),
            procs_key=procs_key,
            gpus_key=gpus_key,
        )
        notes = frame.get("notes")
        if notes:
            sample.notes = [n for n in (parse_note(raw) for raw in notes[:64] if isinstance(raw, dict)) if n]
    except BaseException:
        if facts is not None:
            facts.forget_parsed()
        raise
    return sample

"""Probe frames (JSON dicts) -> the typed model. Tolerant of fields a newer probe adds."""

from __future__ import annotations

import base64

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
)

PROTOCOL_VERSION = 1


def _fd(raw: dict | None) -> FdTarget | None:
    if not raw:
        return None
    return FdTarget(raw.get("path", ""), raw.get("kind", "unknown"), bool(raw.get("append")), raw.get("size"))


def _opt_int(value) -> int | None:
    return None if value is None else int(value)


def parse_gpu(raw: dict) -> GpuSample:
    return GpuSample(
        index=int(raw["index"]),
        uuid=str(raw.get("uuid", "")),
        name=str(raw.get("name", "")),
        util_pct=raw.get("util_pct"),
        mem_used_mib=raw.get("mem_used_mib"),
        mem_total_mib=raw.get("mem_total_mib"),
        temp_c=raw.get("temp_c"),
        power_w=raw.get("power_w"),
        power_limit_w=raw.get("power_limit_w"),
        sm_clock_mhz=raw.get("sm_clock_mhz"),
        processes=tuple(GpuProcess(int(p["pid"]), p.get("mem_used_mib")) for p in raw.get("processes", [])),
    )


# A probe that sends fact deltas (its hello says `fact_deltas`) leaves these fields of a process, a GPU
# and a log tail out of a frame while they have not changed (agent.FrameDeltas), and empty per-frame
# events of a tail (data, reset, skipped, cut), which read as empty.
ROOT_FACTS = ("cmdline", "cwd", "stdout", "stderr", "unbuffered", "unbuffered_reason", "is_python",
              "env_readable", "uid", "user", "dist", "ppid", "start_time", "name", "sid", "pgid")
CHILD_FACTS = ("cmdline", "uid", "user", "ppid", "name", "start_time")
GPU_FACTS = ("uuid", "name", "mem_total_mib", "power_limit_w", "processes")
TAIL_FACTS = ("path", "size", "mtime", "error")


class FactCache:
    """The last facts of every process, GPU and log tail of one probe, for a probe that sends them
    only when they change. One per probe run: a new hello starts a new one.

    It fills the facts a frame left out back into the raw dicts, so every reader sees the same
    `HostSample` as from a full frame. Like the probe, it keeps only the latest frame's entries.
    """

    def __init__(self) -> None:
        self.roots: dict[tuple[int, int], dict] = {}
        self.children: dict[tuple[int, int], dict] = {}
        self.gpus: dict[int, dict] = {}
        self.tails: dict[str, dict] = {}

    @staticmethod
    def _fill(entry: dict, key, names: tuple[str, ...], cache: dict, seen: dict) -> None:
        known = cache.get(key)
        if known is None:
            known = cache[key] = {}
        for name in names:
            if name in entry:
                known[name] = entry[name]
            elif name in known:
                entry[name] = known[name]
        seen[key] = True

    @staticmethod
    def _keep(cache: dict, seen: dict) -> dict:
        return cache if len(seen) == len(cache) else {k: v for k, v in cache.items() if k in seen}

    def fill(self, procs: list[dict], gpus: list[dict] = (), tails: list[dict] = ()) -> None:
        roots: dict = {}
        children: dict = {}
        seen_gpus: dict = {}
        seen_tails: dict = {}
        fill = self._fill
        for proc in procs:
            fill(proc, (proc["pid"], proc.get("start_ticks", 0)), ROOT_FACTS, self.roots, roots)
            for child in proc.get("children") or ():
                fill(child, (child["pid"], child.get("start_ticks", 0)), CHILD_FACTS, self.children, children)
        for gpu in gpus:
            fill(gpu, gpu["index"], GPU_FACTS, self.gpus, seen_gpus)
        for tail in tails:
            fill(tail, tail["key"], TAIL_FACTS, self.tails, seen_tails)
        self.roots = self._keep(self.roots, roots)
        self.children = self._keep(self.children, children)
        self.gpus = self._keep(self.gpus, seen_gpus)
        self.tails = self._keep(self.tails, seen_tails)


def parse_proc(raw: dict) -> ProcInfo:
    return ProcInfo(
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
        children=tuple(
            ChildProc(int(c["pid"]), str(c.get("name", "")), tuple(c.get("cmdline", ())),
                      str(c.get("state", "")), float(c.get("cpu_s", 0.0)), int(c.get("start_ticks", 0)),
                      _opt_int(c.get("uid")), c.get("user"))
            for c in raw.get("children", [])
        ),
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
    procs = {}
    raw_procs = frame.get("procs", [])
    if facts is not None:
        facts.fill(raw_procs, frame.get("gpus", ()), frame.get("tails", ()))
    for raw in raw_procs:
        info = parse_proc(raw)
        procs[info.pid] = info
    return HostSample(
        time=float(frame.get("t", 0.0)),
        gpu_source=str(frame.get("gpu_source", "none")),
        gpus=[parse_gpu(g) for g in frame.get("gpus", [])],
        procs=procs,
        gone=[ExitInfo(int(g["pid"]), float(g.get("start_time", 0)), float(g.get("seen_gone_at", 0)))
              for g in frame.get("gone", [])],
        tails=[
            TailChunk(
                key=str(t["key"]), path=str(t.get("path", "")),
                data=base64.b64decode(t.get("data") or ""), reset=bool(t.get("reset")),
                skipped=int(t.get("skipped", 0)), size=t.get("size"), mtime=t.get("mtime"),
                error=t.get("error"),
                cut=tuple((int(pos), int(n)) for pos, n in t.get("cut") or ()),
            )
            for t in frame.get("tails", [])
        ],
        dirs=[
            DirStat(str(d["key"]), str(d.get("path", "")), bool(d.get("exists")), int(d.get("files", 0)),
                    int(d.get("total_bytes", 0)), d.get("newest_mtime"), d.get("newest_name"), d.get("error"))
            for d in frame.get("dirs", [])
        ],
        gpu_error=frame.get("gpu_error"),
        load1=frame.get("load1"),
        cpu_count=frame.get("cpu_count"),
        cpu_pct=frame.get("cpu_pct"),
        mem_total_kib=frame.get("mem_total_kib"),
        mem_avail_kib=frame.get("mem_avail_kib"),
        driver=frame.get("driver"),
        matches={str(k): [int(p) for p in v] for k, v in (frame.get("matches") or {}).items()},
        candidates={int(k): str(v) for k, v in (frame.get("candidates") or {}).items()},
    )

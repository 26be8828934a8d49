"""The recording format: gzip'd JSON lines, one header line then one line per tick.

A recording is complete enough to rebuild every view of the dashboard at any recorded instant:

    {"format": "gpuwatch-recording", "version": 2, "started": T, "hosts": [...], "settings": {...},
     "gpu_columns": [metric, ...]}
    {"t": T, "states": {...}, "samples": {...}, "pdefs": {...}, "jobs": [...], "gone": [...],
     "logs": {...}, "jprocs": {...}, "outdirs": {...}}

Each tick line holds only what changed since the line before it (deltas), so a steady fleet costs
a few numbers per GPU per sample:
- states: host -> {state, error, hint, retry_at, reconnects}, when any of them changed.
- samples: host -> list of samples that arrived since the last tick (every one, not the latest):
  {"t", "src", facts..., "gpus": [[index, reading, ..., [[pid, mem], ...]], ...],
   "gfacts": {index: {uuid, name, mem_total_mib, power_limit_w, ...}} when they changed, "procs": rows}.
  A GPU row's readings are the header's `gpu_columns` (gpu_metrics.READINGS when it was written); a
  version 1 recording has none and the fixed columns util, mem, temp, power, clock (gpu_metrics.V1_ROW).
  A column this gpuwatch does not know is skipped; a metric the recording lacks reads as None.
- pdefs: process key -> the process's facts that rarely change (cmdline, cwd, fds, children's names);
  a row [key, cpu_s, cpu_children_s, rss_bytes, state, threads, [child cpu_s, ...], child states]
  carries the rest, every sample.
- jobs: the JobView JSON (`status --json`'s) of every job whose view changed; gone: ids dropped.
- logs: job -> {"lines": new lines since the last tick, "total": lines ever seen} (deltas).
- jprocs: job -> process rows, when they changed; outdirs: job -> DirStat JSON or null.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter

from ..model import ChildProc, DirStat, FdTarget, GpuProcess, GpuSample, HostSample, ProcInfo
from ..feeds.probe_frames import parse_dir
from ..probe import gpu_metrics

FORMAT = "gpuwatch-recording"
VERSION = 2  # 2: the header names the GPU rows' columns
HOST_FACTS = ("driver", "cpu_count", "cpu_pct", "load1", "mem_total_kib", "mem_avail_kib")
GPU_FACTS = ("uuid", "name") + gpu_metrics.FACTS
STATE_KEYS = ("state", "error", "hint", "retry_at", "reconnects")


class RecordingError(ValueError):
    """A recording that cannot be read at all (not one, or a newer version); the words say why."""


def header(hosts: list[str], settings: dict, started: float, source: str = "gpuwatch") -> dict:
    return {"format": FORMAT, "version": VERSION, "started": started, "hosts": list(hosts),
            "settings": dict(settings), "source": source, "gpu_columns": list(gpu_metrics.READINGS)}


def check_header(data: object, where: str) -> dict:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{where}: not a gpuwatch recording (its first line has no "
                             f"\"format\": \"{FORMAT}\"); record one with `gpuwatch record FILE`")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise RecordingError(f"{where}: recording version should be a whole number >= 1, got {version!r}")
    if version > VERSION:
        raise RecordingError(f"{where}: recording version {version} is newer than this gpuwatch reads "
                             f"(up to {VERSION}); upgrade gpuwatch")
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise RecordingError(f"{where}: header's \"hosts\" should be a list of host names, got {hosts!r}")
    columns = data.get("gpu_columns", gpu_metrics.V1_ROW)
    if not isinstance(columns, list | tuple) or not all(isinstance(c, str) for c in columns):
        raise RecordingError(f"{where}: header's \"gpu_columns\" should be a list of metric names, got {columns!r}")
    return data


def gpu_columns(header: dict) -> tuple[str, ...]:
    """The metrics of a GPU row, in order, as the recording's header names them."""
    return tuple(header.get("gpu_columns", gpu_metrics.V1_ROW))


# -- GPUs -------------------------------------------------------------------------------------

_row_readings = attrgetter(*gpu_metrics.READINGS)


def gpu_row(gpu: GpuSample) -> list:
    # a process's SM share only where it was read (a shared GPU): [pid, mem] or [pid, mem, sm]
    return [gpu.index, *_row_readings(gpu),
            [[p.pid, p.mem_used_mib] if p.sm_pct is None else [p.pid, p.mem_used_mib, p.sm_pct] for p in gpu.processes]]


def gpu_facts(gpu: GpuSample) -> dict:
    return {key: getattr(gpu, key) for key in GPU_FACTS}


def gpu_from_row(row: list, facts: dict, columns: tuple[str, ...] = gpu_metrics.READINGS) -> GpuSample:
    if len(row) != len(columns) + 2:
        raise ValueError(f"a GPU row of {len(row)} values where its header names {len(columns)} readings")
    values = {name: facts.get(name) for name in gpu_metrics.FACTS}
    values.update((name, value) for name, value in zip(columns, row[1:-1]) if name in gpu_metrics.BY_NAME)
    return GpuSample(index=int(row[0]), uuid=str(facts.get("uuid", "")), name=str(facts.get("name", "")),
                     processes=tuple(GpuProcess(int(p[0]), p[1], p[2] if len(p) > 2 else None) for p in row[-1]),
                     **values)


# -- processes --------------------------------------------------------------------------------

_DYNAMIC = ("cpu_s", "cpu_children_s", "rss_bytes", "state", "threads")


def proc_static(info: ProcInfo) -> dict:
    """The facts of a process that rarely change; its children without their CPU time and state."""
    out = dataclasses.asdict(info)
    for key in _DYNAMIC:
        out.pop(key)
    out["cmdline"] = list(info.cmdline)
    out["children"] = [[c.pid, c.name, list(c.cmdline), c.start_ticks, c.uid, c.user] for c in info.children]
    return out


def proc_row(key: str, info: ProcInfo) -> list:
    return [key, info.cpu_s, info.cpu_children_s, info.rss_bytes, info.state, info.threads,
            [c.cpu_s for c in info.children], "".join((c.state or "?")[:1] for c in info.children)]


def _fd(raw: dict | None) -> FdTarget | None:
    return None if raw is None else FdTarget(**raw)


def proc_from_row(row: list, static: dict) -> ProcInfo:
    _key, cpu_s, cpu_children_s, rss, state, threads, child_cpu, child_states = row
    fields = dict(static)
    children = []
    for i, (pid, name, cmdline, start_ticks, uid, user) in enumerate(fields.pop("children")):
        children.append(ChildProc(pid, name, tuple(cmdline), child_states[i] if i < len(child_states) else "",
                                  child_cpu[i] if i < len(child_cpu) else 0.0, start_ticks, uid, user))
    if "compilers_seen" in fields:  # JSON gives a list; the model holds a tuple
        fields["compilers_seen"] = tuple(fields["compilers_seen"])
    if "dist" in fields:
        fields["dist"] = tuple(tuple(kv) for kv in fields["dist"] or ())
    fields.update(cmdline=tuple(fields["cmdline"]), stdout=_fd(fields.get("stdout")), stderr=_fd(fields.get("stderr")),
                  children=tuple(children), cpu_s=cpu_s, cpu_children_s=cpu_children_s, rss_bytes=rss,
                  state=state, threads=threads)
    return ProcInfo(**fields)


def dirstat_json(stat: DirStat | None) -> dict | None:
    return None if stat is None else dataclasses.asdict(stat)


def dirstat_from_json(data: dict | None) -> DirStat | None:
    return None if data is None else parse_dir(data)  # (asdict's keys are the probe's)


def sample_from_json(data: dict, gfacts: dict[int, dict], procs: dict[int, ProcInfo],
                     columns: tuple[str, ...] = gpu_metrics.READINGS) -> HostSample:
    gpus = [gpu_from_row(row, gfacts.get(int(row[0]), {}), columns) for row in data.get("gpus", ())]
    return HostSample(float(data["t"]), str(data.get("src") or "none"), gpus, procs,
                      gpu_error=data.get("gerr"), **{k: data.get(k) for k in HOST_FACTS})

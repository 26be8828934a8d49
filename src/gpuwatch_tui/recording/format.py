"""The recording format: gzip'd JSON lines, one header line then one line per tick.

A recording is complete enough to rebuild every view of the dashboard at any recorded instant:

    {"format": "gpuwatch-recording", "version": 1, "started": T, "hosts": [...], "settings": {...}}
    {"t": T, "states": {...}, "samples": {...}, "pdefs": {...}, "jobs": [...], "gone": [...],
     "logs": {...}, "jprocs": {...}, "outdirs": {...}}

Each tick line holds only what changed since the line before it (deltas), so a steady fleet costs
a few numbers per GPU per sample:
- states: host -> {state, error, hint, retry_at, reconnects}, when any of them changed.
- samples: host -> list of samples that arrived since the last tick (every one, not the latest):
  {"t", "src", facts..., "gpus": [[index, util, mem, temp, power, clock, [[pid, mem], ...]], ...],
   "gfacts": {index: {uuid, name, mem_total_mib, power_limit_w}} when they changed, "procs": rows}.
- pdefs: process key -> the process's facts that rarely change (cmdline, cwd, fds, children's names);
  a row [key, cpu_s, cpu_children_s, rss_bytes, state, threads, [child cpu_s, ...], child states]
  carries the rest, every sample.
- jobs: the JobView JSON (`status --json`'s) of every job whose view changed; gone: ids dropped.
- logs: job -> {"lines": new lines since the last tick, "total": lines ever seen} (deltas).
- jprocs: job -> process rows, when they changed; outdirs: job -> DirStat JSON or null.
"""

from __future__ import annotations

import dataclasses

from ..model import ChildProc, DirStat, FdTarget, GpuProcess, GpuSample, HostSample, ProcInfo
from ..feeds.probe_frames import parse_dir

FORMAT = "gpuwatch-recording"
VERSION = 1
HOST_FACTS = ("driver", "cpu_count", "cpu_pct", "load1", "mem_total_kib", "mem_avail_kib")
GPU_FACTS = ("uuid", "name", "mem_total_mib", "power_limit_w")
STATE_KEYS = ("state", "error", "hint", "retry_at", "reconnects")


class RecordingError(ValueError):
    """A recording that cannot be read at all (not one, or a newer version); the words say why."""


def header(hosts: list[str], settings: dict, started: float, source: str = "gpuwatch") -> dict:
    return {"format": FORMAT, "version": VERSION, "started": started, "hosts": list(hosts),
            "settings": dict(settings), "source": source}


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
    return data


# -- GPUs -------------------------------------------------------------------------------------

def gpu_row(gpu: GpuSample) -> list:
    return [gpu.index, gpu.util_pct, gpu.mem_used_mib, gpu.temp_c, gpu.power_w, gpu.sm_clock_mhz,
            [[p.pid, p.mem_used_mib] for p in gpu.processes]]


def gpu_facts(gpu: GpuSample) -> dict:
    return {key: getattr(gpu, key) for key in GPU_FACTS}


def gpu_from_row(row: list, facts: dict) -> GpuSample:
    index, util, mem, temp, power, clock, procs = row
    return GpuSample(index=int(index), uuid=str(facts.get("uuid", "")), name=str(facts.get("name", "")),
                     util_pct=util, mem_used_mib=mem, mem_total_mib=facts.get("mem_total_mib"), temp_c=temp,
                     power_w=power, power_limit_w=facts.get("power_limit_w"), sm_clock_mhz=clock,
                     processes=tuple(GpuProcess(int(pid), m) for pid, m in procs))


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


def sample_from_json(data: dict, gfacts: dict[int, dict], procs: dict[int, ProcInfo]) -> HostSample:
    gpus = [gpu_from_row(row, gfacts.get(int(row[0]), {})) for row in data.get("gpus", ())]
    return HostSample(float(data["t"]), str(data.get("src") or "none"), gpus, procs,
                      gpu_error=data.get("gerr"), **{k: data.get(k) for k in HOST_FACTS})

"""Per-host and per-GPU state with bounded history, and the JSON snapshot built from it.

The store is fed by host sessions (one call per probe frame or state change) and read by the
headless verbs and the dashboard. It does no I/O and holds no locks: everything runs on one
asyncio loop.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .probe import gpu_metrics

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from .model import GpuSample, HostSample, ProcInfo


SNAPSHOT_VERSION = 1


@dataclass
class GpuRecord:
    """One GPU's latest sample plus a ring buffer of its history.

    A value the driver did not give is kept as None, never 0: a chart shows a gap there, and a
    reader can tell "not measured" from "measured idle"."""

    latest: GpuSample
    util_history: deque[float | None]
    mem_history: deque[float | None]  # percent of total
    power_history: deque[float | None]

    def push(self, sample: GpuSample) -> None:
        self.latest = sample
        self.util_history.append(sample.util_pct)
        if sample.mem_used_mib is not None and sample.mem_total_mib:
            self.mem_history.append(100.0 * sample.mem_used_mib / sample.mem_total_mib)
        else:
            self.mem_history.append(None)
        self.power_history.append(sample.power_w)


@dataclass
class HostRecord:
    name: str
    state: str = "connecting"
    error: str | None = None
    gpu_source: str | None = None
    gpu_error: str | None = None
    last_sample_time: float | None = None
    samples_seen: int = 0  # how many samples ever arrived: where a sweep chart writes the newest
    sample_gap_s: float | None = None  # seconds between the last two samples: what one history slot spans
    reconnects: int = 0
    gpus: dict[int, GpuRecord] = field(default_factory=dict)
    procs: dict[int, ProcInfo] = field(default_factory=dict)
    # Facts about the failure that a person can act on (fingerprint, command to trust a key).
    hint: str | None = None
    probe_version: int | None = None
    retry_at: float | None = None  # wall-clock time of the next connect attempt, while failing
    # Host facts of the latest sample (None until a probe reports them).
    driver: str | None = None
    cpu_count: int | None = None
    cpu_pct: float | None = None
    load1: float | None = None
    mem_total_kib: int | None = None
    mem_avail_kib: int | None = None
    procs_time: float | None = None
    # The sample before the latest one (its processes and time): what `proc_cpu_pct` compares with.
    procs_before: dict[int, ProcInfo] = field(default_factory=dict)
    procs_time_before: float | None = None
    _cpu_pct: dict[int, float] | None = field(default=None, repr=False, compare=False)
    # Host CPU % (of all cores) and RAM used % per sample: the history view of a host without GPUs.
    cpu_history: deque[float | None] = field(default_factory=deque)
    ram_history: deque[float | None] = field(default_factory=deque)

    @property
    def gpu_model(self) -> str | None:
        """The GPUs' model ("NVIDIA H200"), or "2 models" for a mixed host; None without GPUs."""
        names = {r.latest.name for r in self.gpus.values() if r.latest.name}
        if not names:
            return None
        return names.pop() if len(names) == 1 else f"{len(names)} models"

    @property
    def mem_used_kib(self) -> int | None:
        if self.mem_total_kib is None or self.mem_avail_kib is None:
            return None
        return self.mem_total_kib - self.mem_avail_kib

    @property
    def proc_cpu_pct(self) -> dict[int, float]:
        """pid -> CPU % (100 = one core) between the last two samples that both saw the process. Made
        when first read after a sample (a screen reads one host's; every host has a sample a second)."""
        pct = self._cpu_pct
        if pct is None:
            pct = self._cpu_pct = process_cpu_pct(self.procs_before, self.procs, self.procs_time_before,
                                                  self.procs_time) if self.procs_time is not None else {}
        return pct

    def sample_age(self, now: float) -> float | None:
        if self.last_sample_time is None:
            return None
        return max(0.0, now - self.last_sample_time)


def process_cpu_pct(before: dict[int, ProcInfo], after: dict[int, ProcInfo], t0: float | None,
                    t1: float) -> dict[int, float]:
    """CPU % of each process seen in both samples (the same process: same start time)."""
    if t0 is None or t1 <= t0:
        return {}
    out = {}
    for pid, info in after.items():
        old = before.get(pid)
        if old is info:  # the frame parser hands the very object of a process that did not move
            out[pid] = 0.0
        elif old is not None and old.start_time == info.start_time:
            out[pid] = max(0.0, 100.0 * (info.cpu_s - old.cpu_s) / (t1 - t0))
    return out


class Store:
    """All hosts, in config order."""

    def __init__(self, host_names: list[str], history: int) -> None:
        self.history = history
        self.hosts: dict[str, HostRecord] = {name: HostRecord(name) for name in host_names}
        self.generation = 0  # bumped on every change; lets readers skip redundant work

    def add_host(self, name: str) -> bool:
        """A host watched from now on (a Slurm job's node); False if it is already here."""
        if name in self.hosts:
            return False
        self.hosts[name] = HostRecord(name)
        self.generation += 1
        return True

    def set_state(self, host: str, state: str, error: str | None = None, hint: str | None = None,
                  retry_at: float | None = None) -> None:
        rec = self.hosts[host]
        if state == "reconnecting" and rec.state != "reconnecting":
            rec.reconnects += 1
        rec.state = state
        rec.error = error
        rec.hint = hint
        rec.retry_at = retry_at
        self.generation += 1

    def apply_sample(self, host: str, sample: HostSample) -> None:
        rec = self.hosts[host]
        rec.gpu_source = sample.gpu_source
        rec.gpu_error = sample.gpu_error
        if rec.last_sample_time is not None and sample.time > rec.last_sample_time:
            rec.sample_gap_s = sample.time - rec.last_sample_time
        rec.last_sample_time = sample.time
        rec.samples_seen += 1
        rec.driver = sample.driver or rec.driver  # an nvidia-smi tick may come before its first line
        rec.cpu_count = sample.cpu_count
        rec.cpu_pct = sample.cpu_pct
        rec.load1 = sample.load1
        rec.mem_total_kib = sample.mem_total_kib
        rec.mem_avail_kib = sample.mem_avail_kib
        if rec.cpu_history.maxlen != self.history:
            rec.cpu_history, rec.ram_history = deque(maxlen=self.history), deque(maxlen=self.history)
        rec.cpu_history.append(sample.cpu_pct)
        used = rec.mem_used_kib
        rec.ram_history.append(100.0 * used / rec.mem_total_kib if used is not None and rec.mem_total_kib else None)
        records = rec.gpus
        for gpu in sample.gpus:
            record = records.get(gpu.index)
            if record is None or record.latest.uuid != gpu.uuid:
                record = GpuRecord(
                    gpu,
                    deque(maxlen=self.history),
                    deque(maxlen=self.history),
                    deque(maxlen=self.history),
                )
                records[gpu.index] = record
            record.push(gpu)
        if len(records) != len(sample.gpus):  # a GPU no longer reported (the common frame has them all)
            seen = {gpu.index for gpu in sample.gpus}
            for index in [i for i in records if i not in seen]:
                del records[index]
        rec.procs_before, rec.procs_time_before = rec.procs, rec.procs_time
        rec.procs = sample.procs
        rec.procs_time = sample.time
        rec._cpu_pct = None  # (`proc_cpu_pct` made again when read)
        self.generation += 1

    def host_json(self, rec: HostRecord, now: float) -> dict:
        age = rec.sample_age(now)
        return {
            "name": rec.name,
            "state": rec.state,
            "error": rec.error,
            "gpu_source": rec.gpu_source,
            "last_sample_age_s": None if age is None else round(age, 3),
            "gpus": [gpu_json(r.latest) for _, r in sorted(rec.gpus.items())],
            "hint": rec.hint,
            "gpu_error": rec.gpu_error,
            "reconnects": rec.reconnects,
            "retry_in_s": None if rec.retry_at is None else round(max(0.0, rec.retry_at - now), 1),
            "driver": rec.driver,
            "cpu_count": rec.cpu_count,
            "cpu_pct": rec.cpu_pct,
            "load1": rec.load1,
            "mem_total_kib": rec.mem_total_kib,
            "mem_avail_kib": rec.mem_avail_kib,
        }

    def snapshot(self, now: float | None = None, jobs: list[dict] | None = None) -> dict:
        now = time.time() if now is None else now
        return {
            "version": SNAPSHOT_VERSION,
            "time": round(now, 3),
            "hosts": [self.host_json(rec, now) for rec in self.hosts.values()],
            "jobs": jobs or [],
        }


def _num(value: float | None, digits: int = 1) -> float | int | None:
    if value is None:
        return None
    rounded = round(float(value), digits)
    return int(rounded) if rounded.is_integer() else rounded


def gpu_json(gpu: GpuSample) -> dict:
    out: dict = {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name}
    for name in gpu_metrics.NAMES:
        out[name] = _num(getattr(gpu, name))
    out["processes"] = [_gpu_process_json(p) for p in gpu.processes]
    return out


def _gpu_process_json(p) -> dict:
    """A GPU process: its SM share only where it was read (a GPU with more than one process)."""
    out = {"pid": p.pid, "mem_used_mib": _num(p.mem_used_mib)}
    if p.sm_pct is not None:
        out["sm_pct"] = _num(p.sm_pct)
    return out

"""A DashboardSource read from a JSON recording: for tests, snapshots, screenshots and demos.

It feeds the recorded samples through the real Store, so the UI sees exactly what the core would
build. Time is frozen at the recording's `now` unless `advance()` moves it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import deque
from pathlib import Path
from typing import Callable

from ..model import DirStat, GpuSample, HostSample, ProcInfo
from ..feeds.probe_frames import parse_dir, parse_gpu, parse_proc
from ..probe import gpu_metrics
from ..store import Store
from ..views import JobView

LOG_LIMIT = 10_000  # lines kept per job, like the live core's bound


def _gpu_sample(gpu: dict, values: list[float | None] | dict[str, float | None]) -> GpuSample:
    """A recorded GPU (fixed facts + one sample) read by the probe's own frame parser, so a recording
    means what a live frame would. A sample is a row of the fixed columns util, mem, temp, power, clock
    (gpu_metrics.V1_ROW) or an object of metric name -> value (any metric of gpu_metrics)."""
    frame = {key: value for key, value in gpu.items() if key != "samples"}
    frame.update(values if isinstance(values, dict) else zip(gpu_metrics.V1_ROW, values, strict=True))
    return parse_gpu(frame)


HOST_FACTS = ("driver", "cpu_count", "cpu_pct", "load1", "mem_total_kib", "mem_avail_kib", "gpu_error")


def _host_facts(host: dict) -> dict:
    """The host's own facts (driver, CPU, RAM) as a probe frame would carry them."""
    return {key: host[key] for key in HOST_FACTS if key in host}


class RecordedSource:
    """Implements DashboardSource from a fixture file (see tests/ui/data/fleet.json)."""

    def __init__(self, path: Path | str, history: int = 60, now: float | None = None) -> None:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        self._now = float(now if now is not None else data["now"])
        self.paused = False
        self._callbacks: list[Callable[[], None]] = []
        self._stopped = asyncio.Event()  # binds to a loop only when awaited
        self.store = Store([h["name"] for h in data["hosts"]], history)
        self._hosts = data["hosts"]
        self._jobs: list[JobView] = [JobView.from_json(job) for job in data.get("jobs", [])]
        self._procs = {k: [parse_proc(p) for p in v] for k, v in data.get("procs", {}).items()}
        self._replay(self._now)
        self._logs: dict[str, deque[str]] = {}
        self._log_totals: dict[str, int] = {}
        for job_id, log in data.get("logs", {}).items():
            self._logs[job_id] = deque(log.get("lines", ()), maxlen=LOG_LIMIT)
            self._log_totals[job_id] = int(log.get("total", len(log.get("lines", ()))))
        self._outdirs = {k: parse_dir(v) for k, v in data.get("outdirs", {}).items()}

    # -- actions: a recording has no host to act on
    def plan_action(self, job_id: str, name: str):
        from ..actions.service import ActionRefused  # the service only once a key is pressed

        raise ActionRefused("actions are disabled when replaying a recording: there is no host to act on")

    async def run_action(self, plan):
        return self.plan_action(plan.job_id, plan.action)

    def latest_dump(self, job_id: str):
        return None

    async def write_report(self, job_id: str):
        from ..incident_report import ReportError  # only once a report is asked for

        raise ReportError("incident reports are written from live hosts: this dashboard replays a recording")

    def _host_procs(self, host: str, at: float, now: float) -> dict[int, ProcInfo]:
        """The recorded jobs' processes on `host` as a frame at `at` would list them; CPU time is
        taken back at each process's lifetime average rate (a recording has one reading)."""
        jobs = {job.id for job in self._jobs if job.host == host}
        procs = {}
        for job_id in jobs:
            for info in self._procs.get(job_id, ()):
                alive = max(1.0, now - info.start_time)
                earlier = max(0.0, info.cpu_s - info.cpu_s * (now - at) / alive)
                procs[info.pid] = dataclasses.replace(info, cpu_s=earlier)
        return procs

    def _replay(self, now: float) -> None:
        for host in self._hosts:
            name = host["name"]
            gpus = host.get("gpus", [])
            if gpus:
                n = max(len(g["samples"]) for g in gpus)
                last = now - host.get("sample_age_s", 0.0)
                for i in range(n):
                    samples = [_gpu_sample(g, g["samples"][min(i, len(g["samples"]) - 1)]) for g in gpus]
                    at = last - (n - 1 - i)
                    procs = self._host_procs(name, at, last) if i >= n - 2 else {}
                    self.store.apply_sample(name, HostSample(at, host.get("gpu_source", "nvml"),
                                                             samples, procs, **_host_facts(host)))
            else:  # a host without GPUs: its recorded CPU / RAM readings, oldest first
                readings = host.get("host_samples", [])
                last = now - host.get("sample_age_s", 0.0)
                for i, reading in enumerate(readings):
                    facts = {**_host_facts(host), **{k: v for k, v in reading.items() if k in HOST_FACTS}}
                    self.store.apply_sample(name, HostSample(last - (len(readings) - 1 - i),
                                                             host.get("gpu_source", "none"), [], {}, **facts))
            self.store.set_state(name, host.get("state", "connected"), host.get("error"), host.get("hint"))
            self.store.hosts[name].reconnects = host.get("reconnects", 0)

    # -- DashboardSource -------------------------------------------------------------------

    def now(self) -> float:
        return self._now

    def jobs(self) -> list[JobView]:
        return self._jobs

    def job_log(self, job_id: str) -> list[str]:
        return list(self._logs.get(job_id, ()))

    def job_log_total(self, job_id: str) -> int:
        return self._log_totals.get(job_id, 0)

    def job_procs(self, job_id: str) -> list[ProcInfo]:
        return self._procs.get(job_id, [])

    def job_outdir(self, job_id: str) -> DirStat | None:
        return self._outdirs.get(job_id)

    def dismiss_job(self, job_id: str) -> bool:
        before = len(self._jobs)
        self._jobs[:] = [job for job in self._jobs if job.id != job_id]
        for table in (self._logs, self._log_totals, self._procs, self._outdirs):
            table.pop(job_id, None)
        self.notify()
        return len(self._jobs) < before

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    async def run(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        self._stopped.set()

    # -- for tests: make things happen -----------------------------------------------------

    def notify(self) -> None:
        for callback in self._callbacks:
            callback()

    def append_log(self, job_id: str, lines: list[str]) -> None:
        self._logs.setdefault(job_id, deque(maxlen=LOG_LIMIT)).extend(lines)
        self._log_totals[job_id] = self._log_totals.get(job_id, 0) + len(lines)
        self.notify()

    def advance(self, seconds: float = 1.0) -> None:
        """Move the clock and repeat every GPU's last sample (as a steady fleet would)."""
        self._now += seconds
        for name, host in self.store.hosts.items():
            if (host.gpus or host.last_sample_time is not None) and host.state == "connected":
                samples = [r.latest for _, r in sorted(host.gpus.items())]
                facts = {key: getattr(host, key) for key in HOST_FACTS}
                self.store.apply_sample(name, HostSample(self._now, host.gpu_source or "nvml", samples, host.procs,
                                                         **facts))
        self.notify()

    def set_job(self, job_id: str, **changes) -> None:
        """Replace fields of one job's view (JobView field names; views are frozen)."""
        self._jobs[:] = [dataclasses.replace(job, **changes) if job.id == job_id else job for job in self._jobs]
        self.notify()


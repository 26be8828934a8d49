"""A prometheus-client Collector that reads the store and the tracker's job views at scrape time.

Nothing is kept between scrapes: every scrape is a fresh read of the core, so a host or job that
went away is gone from the next scrape. Ended jobs (finished, crashed) stay for `ended_job_ttl`
seconds, then drop out: label cardinality stays bounded by what runs now plus what ended recently.

Note for scrape configs: the `job` label here is the training job; Prometheus renames it to
`exported_job` unless the scrape config says `honor_labels: true`.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ..probe import gpu_metrics
from ..store import Store
from ..views import JobView
from ..vocab import ENDED_PHASES, HOST_OK_STATES, PHASES
from .families import FastGauge, LabelText

MIB = 1024 * 1024
CMD_LABEL_MAX = 200  # a command line can be kilobytes; a label is for telling jobs apart
GPU_LABELS = ["host", "gpu", "uuid", "model"]
JOB_LABELS = ["host", "job"]


class GpuwatchCollector(Collector):
    def __init__(self, store: Store, tracker, ended_job_ttl: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.tracker = tracker
        self.ended_job_ttl = ended_job_ttl
        self.clock = clock
        self.label_text = LabelText()  # series' label text, reused across scrapes (families.py)

    def describe(self) -> list[Metric]:
        return []  # the families are built at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        self.label_text.next_scrape()
        now = self.clock()
        jobs = self.exported_jobs(now)
        yield from self._hosts(now)
        yield from self._gpus(jobs)
        yield from self._jobs(jobs, now)

    def _gauge(self, name: str, documentation: str, labels: list[str]) -> FastGauge:
        return FastGauge(name, documentation, labels, self.label_text)

    # ------------------------------------------------------------------------------
    def exported_jobs(self, now: float) -> list[JobView]:
        if self.tracker is None:
            return []
        kept = []
        for view in self.tracker.views(now):
            if (view.phase in ENDED_PHASES or not view.alive) and view.leftovers is None:  # leftovers: still a cost
                ended = view.ended_at if view.ended_at is not None else view.since
                if ended is not None and now - ended > self.ended_job_ttl:
                    continue
            kept.append(view)
        return kept

    def _hosts(self, now: float) -> Iterator[Metric]:
        up = self._gauge("gpuwatch_host_up", "1 when gpuwatch has live data from the host (state connected)",
                               labels=["host"])
        state = self._gauge("gpuwatch_host_state", "1 for the host's current connection state",
                                  labels=["host", "state", "gpu_source"])
        age = self._gauge("gpuwatch_host_sample_age_seconds",
                                "Seconds since the host's last sample (for a Prometheus source: its last scrape)",
                                labels=["host"])
        for rec in self.store.hosts.values():
            up.add_metric([rec.name], 1.0 if rec.state in HOST_OK_STATES else 0.0)
            state.add_metric([rec.name, rec.state, rec.gpu_source or ""], 1.0)
            sample_age = rec.sample_age(now)
            if sample_age is not None:
                age.add_metric([rec.name], sample_age)
        yield from (up, state, age)

    def _gpus(self, jobs: list[JobView]) -> Iterator[Metric]:
        # One family per metric the table gives a Prometheus name: (row, family, scale to the base unit).
        families = [(m.name, self._gauge(m.prom[0], m.prom[1], labels=GPU_LABELS), m.prom[2])
                    for m in gpu_metrics.METRICS if m.prom]
        proc_mem = self._gauge(
            "gpuwatch_process_gpu_memory_bytes",
            "GPU memory held by one process, with the job gpuwatch attributes it to (empty: none)",
            labels=["host", "gpu", "pid", "job"])
        job_of = _job_by_pid(jobs, self.tracker)
        for rec in self.store.hosts.values():
            if rec.state not in HOST_OK_STATES:
                continue  # a down host's last figures are not current: host_up says so, no stale values
            for index, record in sorted(rec.gpus.items()):
                g = record.latest
                labels = [rec.name, str(index), g.uuid, g.name]
                for name, family, scale in families:
                    value = getattr(g, name)
                    if value is not None:
                        family.add_metric(labels, value * scale)
                for proc in g.processes:
                    if proc.mem_used_mib is not None:
                        proc_mem.add_metric([rec.name, str(index), str(proc.pid), job_of.get((rec.name, proc.pid), "")],
                                            proc.mem_used_mib * MIB)
        yield from (family for _, family, _ in families)
        yield proc_mem

    def _jobs(self, jobs: list[JobView], now: float) -> Iterator[Metric]:
        phase = self._gauge(
            "gpuwatch_job_phase", "1 for the job's current phase, 0 for the others (a state set); "
            "detail names what kind (e.g. nccl-spin, buffered-stdout) on the current phase",
            labels=["host", "job", "phase", "detail"])
        since = self._gauge("gpuwatch_job_phase_since_timestamp_seconds",
                                  "When the job entered its current phase (unix time)", labels=JOB_LABELS)
        progress = self._gauge("gpuwatch_job_progress_ratio", "Steps done / total steps, 0..1",
                                     labels=JOB_LABELS)
        quiet = self._gauge("gpuwatch_job_seconds_since_log_line",
                                  "Seconds since the job's log last grew", labels=JOB_LABELS)
        alive = self._gauge("gpuwatch_job_alive", "1 while the job has a live process", labels=JOB_LABELS)
        info = self._gauge("gpuwatch_job_info", "Always 1: the job's log path and command line",
                                 labels=["host", "job", "log", "cmd"])
        left = self._gauge("gpuwatch_job_leftover_processes",
                           "Processes of the job still running after its main process or launcher went",
                           labels=JOB_LABELS)
        left_mem = self._gauge("gpuwatch_job_leftover_gpu_memory_bytes",
                               "GPU memory held by the job's leftover processes", labels=JOB_LABELS)
        for view in jobs:
            key = (view.host, view.name)
            for name in PHASES:
                current = name == view.phase
                phase.add_metric((*key, name, (view.detail or "") if current else ""), 1.0 if current else 0.0)
            since.add_metric(key, view.since)
            if view.progress.fraction is not None:
                progress.add_metric(key, view.progress.fraction)
            last_log = _last_log_growth(self.tracker, view.id)
            if last_log is not None:
                quiet.add_metric(key, max(0.0, now - last_log))
            alive.add_metric(key, 1.0 if view.alive else 0.0)
            info.add_metric([*key, view.log or "", _command(self.tracker, view.id)], 1.0)
            leftovers = view.leftovers
            left.add_metric(key, float(leftovers.count if leftovers is not None else 0))
            left_mem.add_metric(key, float(leftovers.gpu_memory_bytes if leftovers is not None else 0))
        yield from (phase, since, progress, quiet, alive, info, left, left_mem)


def _job_by_pid(jobs: list[JobView], tracker) -> dict[tuple[str, int], str]:
    """(host, pid) -> job name, for every process of a job that holds GPU memory."""
    out: dict[tuple[str, int], str] = {}
    for view in jobs:
        state = tracker.state(view.id) if tracker is not None else None
        gpu_pids = getattr(state, "gpu_pids", ()) or ()
        left = view.leftovers.pids if view.leftovers is not None else ()
        for pid in (*view.pids, *gpu_pids, *left):
            out[(view.host, pid)] = view.name
    return out


def _last_log_growth(tracker, job_id: str) -> float | None:
    state = tracker.state(job_id)
    log = state.primary_log if state is not None else None
    if log is None:
        return None
    if log.last_growth is not None:
        return log.last_growth
    return log.mtime if log.size else None  # bytes written before gpuwatch looked


def _command(tracker, job_id: str) -> str:
    procs = tracker.procs(job_id)
    if not procs:
        return ""
    cmd = " ".join(procs[0].cmdline)
    return cmd if len(cmd) <= CMD_LABEL_MAX else cmd[: CMD_LABEL_MAX - 1] + "…"

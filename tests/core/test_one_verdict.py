"""One verdict per job and moment: the dashboard, `status` (JSON and table), `watch`, `report` and `export` all
read the one engine's views, so one scripted situation (a rank spinning in a collective, a job stalled with its
GPU idle) reads the same phase and reason on each of them at the same moment. A verdict with too little history
says so the same way everywhere (`provisional`), rather than differing."""

from __future__ import annotations

import re

import pytest

from gpuwatch_tui.export.collector import GpuwatchCollector
from gpuwatch_tui.incident_report import render_report
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import FdTarget, TailChunk
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.status_table import render_status
from gpuwatch_tui.store import Store
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.views import JobView

from tests.jobs.procs import gpu, proc, sample, torchrun_tree

HOST = "gpu1"
OTHER_LOG = FdTarget("/work/other/other.log", "file", append=True, size=0)


class Watched:
    """The part of a Monitor the surfaces read (its store and tracker), fed scripted frames."""

    def __init__(self, stall_after_s: float = 60.0) -> None:
        self.tracker = JobTracker(JobSettings(stall_after_s=stall_after_s))
        self.store = Store([HOST], 600)
        self.sessions = {HOST: None}

    def jobs_json(self, now):
        return Monitor.jobs_json(self, now)

    def snapshot(self, now):
        return Monitor.snapshot(self, now)

    def frame(self, t: float, logged: bytes = b"") -> None:
        # Two ranks of torchrun waiting in a collective: 100% util at idle power, each spinning a core.
        procs, gpus = torchrun_tree(cpu=10.0 + t, util=100.0, power=121.0)
        # A second job: GPU memory held, nothing running, CPU flat.
        procs[500] = proc(500, 1, ["/venv/bin/python", "other.py"], cpu=3.0, stdout=OTHER_LOG, start=900.0)
        gpus.append(gpu(2, [500], util=0.0, power=119.0))
        wants = self.tracker.wanted(HOST)
        tails = [TailChunk(k, path, logged, False, 0, None, None, None)
                 for k, path in wants.tails.items()] if logged else []
        s = sample(t, procs, gpus, tails=tails)
        self.store.apply_sample(HOST, s)
        self.tracker.update(HOST, s, now=t)


def scripted(until: float, step: float = 5.0) -> Watched:
    w = Watched()
    t = 1000.0
    w.frame(t)
    w.frame(t + step, b" 10%|#         | 100/1000 [01:00<09:00, 1.67it/s]\n")
    t += step
    while t < until:
        t += step
        w.frame(t)
    return w


def verdicts_on_every_surface(w: Watched, now: float) -> dict[str, dict[str, tuple]]:
    """name -> {job name: (phase, detail, provisional)} as each surface gives it at `now`."""
    out: dict[str, dict[str, tuple]] = {}
    snapshot = w.snapshot(now)  # `status --json` and every `watch` line
    out["status --json"] = {j["name"]: (j["phase"], j["detail"], j["provisional"]) for j in snapshot["jobs"]}
    table = render_status(snapshot)  # `status`
    for j in snapshot["jobs"]:
        [row] = [line for line in table.splitlines() if line.startswith(HOST) and f" {j['name']} " in line
                 and str(j["pids"][0]) in line]
        phase = next(p for p in ("stalled", "silent", "training", "unknown", "starting") if f" {p}" in row)
        detail = row.split(f" {phase} (", 1)[1].split(")", 1)[0] if f" {phase} (" in row else None
        after = row.split(f" {phase}", 1)[1].split("  ", 1)[0]
        out.setdefault("status table", {})[j["name"]] = (phase, detail, after.endswith("?"))
    views = MonitorSource(monitor=w)  # the dashboard
    views.now = lambda: now
    out["dashboard"] = {v.name: (v.phase, v.detail, v.provisional is not None) for v in views.jobs()}
    for v in w.tracker.views(now):  # `report`
        text = render_report(w, v, now)
        head = text.split("## Verdict", 1)[1].strip().splitlines()[0]
        phase = head.split("**")[1]
        detail = head.split("(", 1)[1].split(")", 1)[0] if "** (" in head else None
        out.setdefault("report", {})[v.name] = (phase, detail, "\nProvisional: " in text)
    collector = GpuwatchCollector(w.store, w.tracker, 3600.0, clock=lambda: now)  # `export`
    [family] = [m for m in collector.collect() if m.name == "gpuwatch_job_phase"]
    provisional = {v.name: v.provisional is not None for v in w.tracker.views(now)}
    out["export"] = {s.labels["job"]: (s.labels["phase"], s.labels["detail"] or None, provisional[s.labels["job"]])
                     for s in family.samples if s.value == 1.0}
    # A recording / replay reads the JSON back.
    out["replay"] = {v.name: (v.phase, v.detail, v.provisional is not None)
                     for v in (JobView.from_json(j) for j in snapshot["jobs"])}
    return out


def test_every_surface_reads_the_same_verdict_at_the_same_moment():
    w = scripted(until=1120.0)
    surfaces = verdicts_on_every_surface(w, 1120.0)
    expected = {"train.py": ("stalled", "nccl-spin", False), "other.py": ("stalled", "no-progress", False)}
    for name, got in surfaces.items():
        assert got == expected, (name, got)


def test_a_verdict_on_too_little_history_is_provisional_on_every_surface_and_says_why():
    w = scripted(until=1010.0)
    surfaces = verdicts_on_every_surface(w, 1010.0)
    first = surfaces["status --json"]
    assert all(provisional for _, _, provisional in first.values()), first
    for name, got in surfaces.items():
        assert got == first, (name, got)
    [job] = [j for j in w.snapshot(1010.0)["jobs"] if j["name"] == "train.py"]
    assert job["provisional_why"] == "10 s of history of the 30 s the verdict is judged over"
    assert re.search(r"\? provisional: 10 s of history .*: \S+/[a-z2-9]{5} train\.py", render_status(w.snapshot(1010.0)))


@pytest.mark.parametrize("until", [1040.0, 1080.0])
def test_enough_history_makes_the_verdict_final(until):
    w = scripted(until=until)
    jobs = w.snapshot(until)["jobs"]
    assert jobs and not any(j["provisional"] for j in jobs), [(j["name"], j["provisional_why"]) for j in jobs]
    assert "provisional" not in render_status(w.snapshot(until))

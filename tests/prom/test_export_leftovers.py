"""The exporter's leftover gauges: per job, the processes it left running and the GPU memory they hold; a job
that ended with leftovers stays exported past the ended-job window while they live."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

from prometheus_client import CollectorRegistry

from gpuwatch_tui.export.collector import GpuwatchCollector
from gpuwatch_tui.export.families import render
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ExitInfo
from gpuwatch_tui.store import Store
from tests.jobs.test_leftovers import HOST, feed, holding, single_job_with_child, worker


def scrape(tracker, now: float) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuwatchCollector(Store([HOST], 10), tracker, ended_job_ttl=60.0, clock=lambda: now))
    return render(registry).decode()


def test_leftover_gauges_per_job():
    tr = JobTracker()
    main, gpus = single_job_with_child(child_on_gpu=False)
    for t in (0.0, 1.0):
        feed(tr, t, {200: main}, gpus)
    text = scrape(tr, 1.0)
    sid = tr.views()[0].short_id
    assert sid
    labels = f'host="{HOST}",job="train.py",job_id="{sid}"'
    assert f'gpuwatch_job_leftover_processes{{{labels}}} 0.0' in text
    orphan = worker(201, 1, 2010)
    feed(tr, 2.0, {201: orphan}, [holding(0, {201: 12_000.0})], gone=[ExitInfo(200, main.start_time, 2.0)])
    for t in (3.0, 4.0):
        feed(tr, t, {201: orphan}, [holding(0, {201: 12_000.0})])
    text = scrape(tr, 500.0)  # long after the job ended: kept while its leftovers live
    assert f'gpuwatch_job_leftover_processes{{{labels}}} 1.0' in text
    assert f'gpuwatch_job_leftover_gpu_memory_bytes{{{labels}}} 1.2582912e+10' in text  # 12000 MiB

"""Four jobs of one host all named `train.py`: the export gives each its own label set (job_id), no label
set twice in a family (Prometheus would keep one series and a stall alert could miss the stalled job),
no pid or command line as a label, and the page passes the real `promtool check metrics`."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client is not installed (pip install -e '.[test]')")

from prometheus_client import CollectorRegistry

from gpuwatch_tui.export.collector import GpuwatchCollector
from gpuwatch_tui.export.families import render
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.store import Store
from tests.jobs.procs import gpu, proc, sample

HOST = "node1"
PIDS = (201, 202, 203, 204)
SERIES = re.compile(r"^(\w+)(\{.*\})? (\S+)$")


def four_train_py(frames: int = 4) -> tuple[Store, JobTracker, float]:
    """Four `python train.py` runs started from shells that exited (each its own job), one per GPU."""
    store = Store([HOST], history=60)
    tracker = JobTracker()
    t = 2000.0
    for i in range(frames):
        t = 2000.0 + i
        procs = {pid: proc(pid, 1, ["/venv/bin/python", "train.py", "--seed", str(pid)], cpu=10.0 + i)
                 for pid in PIDS}
        s = sample(t, procs, [gpu(n, [pid], util=99.0, power=690.0) for n, pid in enumerate(PIDS)])
        store.apply_sample(HOST, s)
        tracker.update(HOST, s, t)
    store.set_state(HOST, "connected")
    return store, tracker, t


def scrape(store: Store, tracker: JobTracker, now: float) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpuwatchCollector(store, tracker, 600.0, clock=lambda: now))
    return render(registry).decode()


def series(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2) or "") for line in text.splitlines()
            if not line.startswith("#") and (m := SERIES.match(line))]


def test_four_same_named_jobs_are_four_label_sets():
    store, tracker, now = four_train_py()
    views = [v for v in tracker.views() if v.name == "train.py"]
    assert len(views) == 4 and len({v.short_id for v in views}) == 4
    text = scrape(store, tracker, now)
    rows = series(text)
    assert len(rows) == len(set(rows)), [r for r in rows if rows.count(r) > 1]  # no label set twice
    for v in views:
        alive = [r for r in rows if r[0] == "gpuwatch_job_alive" and f'job_id="{v.short_id}"' in r[1]]
        assert len(alive) == 1 and 'job="train.py"' in alive[0][1]
        mem = [r for r in rows if r[0] == "gpuwatch_job_gpu_memory_bytes" and f'job_id="{v.short_id}"' in r[1]]
        assert len(mem) == 1 and f'gpu="{v.gpus[0]}"' in mem[0][1]
    labels = {name for _, lab in rows for name in re.findall(r'(\w+)="', lab)}
    assert not labels & {"pid", "cmd", "cmdline"}, labels
    # bounded: the job series are a fixed number per job, whatever the pids or command lines
    job_rows = [r for r in rows if r[0].startswith("gpuwatch_job_")]
    per_job = {v.short_id: sum(f'job_id="{v.short_id}"' in r[1] for r in job_rows) for v in views}
    assert len(set(per_job.values())) == 1, per_job
    print(f"series: {len(rows)} in all, {len(job_rows)} job series, {next(iter(per_job.values()))} per job")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (Debian: prometheus)")
def test_promtool_accepts_the_page():
    store, tracker, now = four_train_py()
    text = scrape(store, tracker, now)
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    # promtool exits 0 when the page is well formed; its lint notes (naming advice) come on stdout
    assert out.returncode == 0, out.stdout + out.stderr
    assert "duplicate" not in (out.stdout + out.stderr).lower(), out.stdout + out.stderr

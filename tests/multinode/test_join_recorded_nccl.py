"""Two hosts' per-host jobs of one run read as one job, judged over both ranks, fed with the GPU readings
recorded on a real 2x H200 NCCL hang (tests/data/gpu_runs, window nccl_spin): rank 1 stopped itself, rank
0's GPU spun at 100 % util at 128 W. Here each rank runs on its own "host"."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from gpuwatch_tui.jobs.multinode import is_this_host, run_keys
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.short_id import looks_like_short_id, multi_parts, short_id
from gpuwatch_tui.views import JobView

from tests.jobs.procs import gpu, proc, sample

DATA = json.loads((Path(__file__).parents[1] / "data" / "gpu_runs" / "h200_windows.json").read_text())
WINDOW = DATA["windows"]["nccl_spin"]


def rank_proc(rank: int, cpu: float, state: str = "S", **env: str):
    base = {"RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "GROUP_RANK": str(rank),
            "MASTER_ADDR": "node-a", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none", **env}
    p = proc(101, 100, ["/venv/bin/python", "-u", "nccl_hang.py"], cpu=cpu, state=state, unbuffered=True,
             stdout=None)
    return dataclasses.replace(p, dist=tuple(sorted(base.items())), start_ticks=4242 + rank)


def feed(tracker: JobTracker, stop_at: float | None = None) -> list[tuple[float, list[JobView]]]:
    out = []
    t0 = 1_000_000.0
    for i, s in enumerate(WINDOW["samples"]):
        now = t0 + s["t"]
        readings = {g[0]: g for g in s["gpus"]}
        for rank, host in enumerate(("node-a", "node-b")):
            g = readings.get(rank)
            cpu = 1.0 * i if rank == 0 or g is None or g[1] > 0 else 1.0 * i  # rank 1 spins in CPU too before
            gpus = [gpu(0, [101], g[1], g[3])] if g else []
            tracker.update(host, sample(now, {101: rank_proc(rank, cpu=cpu + rank)}, gpus), now)
        out.append((s["t"], tracker.views(now)))
    return out


def test_run_keys_join_hosts_but_not_localhost_rendezvous():
    assert run_keys({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}) == set()
    assert run_keys({"MASTER_ADDR": "localhost", "MASTER_PORT": "1"}) == set()
    assert run_keys({"TORCHELASTIC_RUN_ID": "none"}) == set()  # torchrun's default id names no run
    assert run_keys({"SLURM_JOB_ID": "42", "MASTER_ADDR": "node-a", "MASTER_PORT": "29500"}) == {
        "slurm job 42", "rendezvous node-a:29500"}
    assert is_this_host("127.0.1.1") and not is_this_host("10.0.0.1")


def test_two_hosts_one_job_and_the_idle_gpu_rank_is_named():
    tracker = JobTracker(JobSettings(stall_after_s=30.0))
    run = feed(tracker)
    # Every frame: one job over both hosts (the per-host parts are not shown on their own).
    for t, views in run[2:]:
        assert len(views) == 1, (t, [v.id for v in views])
    job = run[-1][1][0]
    assert job.hosts == ("node-a", "node-b") and job.multi_node and job.run_key == "rendezvous node-a:29500"
    assert [(r.rank, r.host, r.gpus) for r in job.ranks] == [(0, "node-a", (0,)), (1, "node-b", (0,))]
    assert len(tracker.views(joined=False)) == 2
    # While both GPUs train (90-95 % at ~260 W) nobody is blamed.
    training = [v[0] for t, v in run if 3 <= t <= 10]
    assert training and not any(r.culprit for v in training for r in v.ranks)
    # Rank 1's GPU at 0 % while rank 0 spins at 100 % util at 128 W: rank 1 named, first in the evidence.
    assert job.phase == "stalled", job.evidence
    assert job.evidence[0].startswith("rank 1 on node-b: GPU 0 at 0 % util; rank 0 spinning in a collective"), job.evidence
    assert [r.rank for r in job.ranks if r.culprit] == [1]
    # Additive JSON: the single-host keys all there, the ranks round-trip.
    data = job.to_json()
    assert data["hosts"] == ["node-a", "node-b"] and len(data["ranks"]) == 2
    back = JobView.from_json(json.loads(json.dumps(data)))
    assert back.ranks == job.ranks and back.parts == job.parts
    # One short id for the run over both hosts, from its run key (the same on every watcher), on every frame
    # from the one that joined them (before it, node-a's part alone was a job of its own, with its own id)
    parts = tracker.views(joined=False)
    assert looks_like_short_id(job.short_id) and job.short_id == back.short_id
    assert job.short_id == short_id(multi_parts(job.run_key)) and job.short_id not in {p.short_id for p in parts}
    joined = [v[0].short_id for t, v in run if v and v[0].multi_node]
    assert joined and set(joined) == {job.short_id}


def test_one_dead_rank_makes_the_job_crashed_with_the_rank_named():
    from gpuwatch_tui.model import ExitInfo

    tracker = JobTracker(JobSettings(stall_after_s=30.0))
    t0 = 2_000_000.0
    for i in range(12):
        now = t0 + i
        for r, host in enumerate(("node-a", "node-b")):
            procs = {101: rank_proc(r, cpu=2.0 * i)}
            gone = []
            if host == "node-b" and i >= 8:  # rank 1 killed (SIGKILL): its host's part ends
                procs = {}
                gone = [ExitInfo(101, procs_start(r), now - 0.5, None, 9)] if i == 8 else []
            tracker.update(host, sample(now, procs, [gpu(0, [101] if procs else [], 95.0, 600.0)], gone=gone), now)
    (job,) = tracker.views(t0 + 11)
    assert job.multi_node and job.alive, job
    assert job.phase == "crashed", (job.phase, job.evidence)
    assert job.evidence[0].startswith("rank 1 on node-b: process gone; rank 0 waiting"), job.evidence
    assert [(r.rank, r.state) for r in job.ranks] == [(0, "S"), (1, "gone")]
    assert "kill" in job.actions  # rank 0 still runs on node-a: it can be ended from here


def procs_start(r: int) -> float:
    return rank_proc(r, cpu=0.0).start_time

"""A real torchrun of three ranks on one host (gloo, CPU), watched over a loopback sshd: the job lists its
ranks; after the test SIGSTOPs rank 1 the job is `stalled (rank-stopped)` with rank 1 named first in the
evidence and in `status --json`'s ranks; after SIGCONT it trains again and nobody is blamed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.jobs.multinode import MultiNodeJobs, PartFacts
from gpuwatch_tui.monitor import Monitor

from tests.core.helpers import host_entry, settings_for, wait_for
from tests.jobs.procs import proc
from tests.multinode.cluster import SCRIPT
from tests.multinode.test_srun_parts import view, with_env

NPROC = 3


def ranked(monitor):
    return [v for v in monitor.tracker.views() if len(v.ranks) == NPROC and not v.multi_node]


@pytest.fixture
def run(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.fail("torch is not installed")  # under CI this must not pass by skipping
    log = tmp_path / "ddp.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("TORCHELASTIC_RUN_ID", None)
    with open(log, "wb") as out:
        agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                  "--nproc_per_node", str(NPROC), "--max_restarts", "0", str(SCRIPT)],
                                 stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                 cwd=tmp_path, start_new_session=True)
    yield agent, log
    family = []
    try:
        family = psutil.Process(agent.pid).children(recursive=True)
    except psutil.Error:
        pass
    for p in family:
        try:
            p.send_signal(signal.SIGCONT)
            p.kill()
        except psutil.Error:
            pass
    agent.kill()
    agent.wait(10)


def rank_pids(agent) -> dict[int, int]:
    """rank -> pid, from the workers' RANK variables (torchrun's own children)."""
    out = {}
    for p in psutil.Process(agent.pid).children():
        try:
            rank = p.environ().get("RANK")
        except psutil.Error:
            continue
        if rank is not None:
            out[int(rank)] = p.pid
    return out


def test_one_host_job_of_three_ranks_names_the_stopped_one(sshd_factory, ssh_env, run):
    agent, log = run
    (host,) = sshd_factory(1)
    cfg = parse_config({"settings": settings_for(ssh_env, stall_after=60.0),
                        "hosts": [host_entry(host, gpu_source="none")]}, "ranks.toml")
    monitor = Monitor(cfg)

    async def scenario():
        # The ranks train before the watch starts: what is tested is the judging over ranks, not how soon
        # a process seen between its fork and its exec is recognised (a known gap of up to one full walk).
        await wait_for(lambda: log.read_text().count(" loss ") >= 2 * NPROC, 60, 0.1, "the three ranks training")
        await monitor.start()
        try:
            await wait_for(lambda: ranked(monitor), 30, 0.1, "one job with its three ranks")
            job = ranked(monitor)[0]
            pids = rank_pids(agent)
            assert [(r.rank, r.pid, r.host) for r in job.ranks] == [(i, pids[i], host.name) for i in range(NPROC)]
            assert job.phase != "stalled" and not any(r.culprit for r in job.ranks), job
            assert "ranks" in job.to_json() and job.to_json()["ranks"][1]["pid"] == pids[1]

            os.kill(pids[1], signal.SIGSTOP)
            stopped_at = time.monotonic()
            await wait_for(lambda: (j := ranked(monitor)) and j[0].phase == "stalled"
                           and j[0].detail == "rank-stopped", 20, 0.05, "the job stalled by its stopped rank")
            after = time.monotonic() - stopped_at
            job = ranked(monitor)[0]
            assert job.evidence[0] == f"rank 1 on {host.name}: process stopped (T); ranks 0,2 waiting (state S)", job
            assert [r.rank for r in job.ranks if r.culprit] == [1]
            assert "SIGCONT" in job.advice and job.history[-1].phase == "stalled", job
            assert after >= 3.0  # a rank stopped for less is a passing pause (a py-spy dump stops it too)
            print(f"stalled (rank-stopped) {after:.2f} s after the stop: {job.evidence[0]}")

            os.kill(pids[1], signal.SIGCONT)
            await wait_for(lambda: (j := ranked(monitor)) and j[0].phase != "stalled"
                           and not any(r.culprit for r in j[0].ranks), 20, 0.05, "training again, nobody blamed")
        finally:
            await monitor.stop()

    asyncio.run(scenario())


def one_host_part(phase: str, detail: str | None, victim_state: str) -> PartFacts:
    ranks = tuple(with_env(proc(50 + r, 49, ["/venv/bin/python", "-u", "train.py"], stdout=None,
                                state=victim_state if r == 1 else "S"),
                           RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="3") for r in range(3))
    v = view("h:49", "h", phase, detail=detail)
    return PartFacts(v, ranks, frozenset(p.pid for p in ranks), (), None)


def test_a_stopped_rank_outranks_a_generic_stall_but_not_a_crash_or_an_nccl_spin():
    jobs = MultiNodeJobs()
    (first,), _ = jobs.combine([one_host_part("training", None, "T")], 100.0)
    assert first.phase == "training" and first.evidence[0].startswith("rank 1 on h: process stopped (T)")
    (job,), _ = jobs.combine([one_host_part("training", None, "T")], 103.5)
    assert (job.phase, job.detail, job.since) == ("stalled", "rank-stopped", 100.0), job
    assert [h.phase for h in job.history][-1] == "stalled" and [r.rank for r in job.ranks if r.culprit] == [1]
    # The engine's own stall after stall_after keeps the more telling reason ...
    (job,), _ = jobs.combine([one_host_part("stalled", "no-progress", "T")], 140.0)
    assert (job.phase, job.detail, job.since) == ("stalled", "rank-stopped", 100.0), job
    # ... but a GPU-level reason or a crash stands, the rank still named.
    for phase, detail in (("stalled", "nccl-spin"), ("crashed", "exception")):
        (job,), _ = jobs.combine([one_host_part(phase, detail, "T")], 150.0)
        assert (job.phase, job.detail) == (phase, detail) and job.evidence[0].startswith("rank 1 on h:"), job
    # Resumed: nobody blamed, the engine's verdict as it is.
    (job,), _ = jobs.combine([one_host_part("training", None, "S")], 160.0)
    assert job.phase == "training" and not any(r.culprit for r in job.ranks) and len(job.ranks) == 3

"""gpuwatch against a real Slurm: a running, a pending and a failed (exit 3) batch job are listed with
state, reason, nodes, elapsed, limit, expanded log paths and final state; scancel ends a job."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import pytest

from gpuwatch_tui.slurm.cancel import CancelRefused, plan_cancel
from gpuwatch_tui.slurm.client import SlurmClient
from gpuwatch_tui.slurm.runner import LocalRunner
from gpuwatch_tui.slurm.settings import SlurmConfig
from gpuwatch_tui.slurm.watch import SlurmWatch

from .cluster import NODE, PARTITION


def _client(user: str | None = None) -> SlurmClient:
    return SlurmClient(LocalRunner(), SlurmConfig(user=user or "root", poll_interval=1.0))


@pytest.fixture(scope="module")
def three_jobs(slurm_cluster):
    """One job that failed with exit 3, one running (holding the only node), one pending on it."""
    c = slurm_cluster
    failed = c.sbatch("--job-name=fails | three", "-o", "%x-%j-%N-%u.out", script="echo about to fail; exit 3")
    c.wait_state(failed, {"FAILED"})
    running = c.sbatch("--job-name=train run", "--time=10", "-o", "train-%j-%N.log",
                       script="echo step 1; sleep 300")
    c.wait_state(running, {"RUNNING"})
    pending = c.sbatch("--job-name=waits", "--time=1:30:00", script="sleep 5")
    c.wait_state(pending, {"PENDING"})
    # The scheduler writes its reason on its next pass.
    assert wait_for(lambda: "Reason=Resources" in c.run(["scontrol", "show", "job", "-o", pending]).stdout, 15)
    yield {"failed": failed, "running": running, "pending": pending}
    c.run(["scancel", running, pending], check=False)


def wait_for(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_queue_lists_running_and_pending_jobs(slurm_env, three_jobs):
    time.sleep(1.1)  # elapsed > 0
    read = asyncio.run(_client().queue())
    assert read.error is None and read.problems == [], (read.error, read.problems)
    by_id = {j.job_id: j for j in read.jobs}
    run = by_id[three_jobs["running"]]
    assert run.state == "RUNNING" and run.is_active
    assert run.name == "train run" and run.user == "root" and run.partition == PARTITION
    assert run.nodes == (NODE,) and run.nodelist == NODE
    assert run.elapsed_s is not None and run.elapsed_s >= 1
    assert run.time_limit_s == 600
    assert run.start_time and run.start_time.startswith("20")
    # squeue prints the raw pattern: %j and %N are filled in by gpuwatch, relative to the work dir. %N is
    # the node's host name (NodeHostname, this machine's here), as slurmstepd writes it: the very file.
    assert run.stdout == f"{slurm_env.jobs_dir}/train-{three_jobs['running']}-{socket.gethostname()}.log"
    assert wait_for(lambda: os.path.exists(run.stdout) and "step 1" in open(run.stdout).read(), 10)
    pend = by_id[three_jobs["pending"]]
    assert pend.state == "PENDING" and pend.is_pending and pend.reason == "Resources"
    assert pend.nodes == () and pend.time_limit_s == 5400
    assert pend.stdout == f"{slurm_env.jobs_dir}/slurm-{three_jobs['pending']}.out"
    assert three_jobs["failed"] not in by_id


def test_ended_job_final_state_without_accounting(slurm_env, three_jobs):
    """This cluster has no slurmdbd: sacct fails, and scontrol answers (the job is younger than MinJobAge)."""
    client = _client()
    finals, problems = asyncio.run(client.final_states([three_jobs["failed"]]))
    assert client.accounting is False
    assert problems == []
    (job,) = finals
    assert job.state == "FAILED" and job.is_ended
    assert job.exit_code == 3 and job.exit_signal is None
    assert job.nodes == (NODE,) and job.source == "scontrol"
    # scontrol (22.05) filled %x %j %u but left %N: gpuwatch fills in the batch node's host name.
    assert job.stdout == f"{slurm_env.jobs_dir}/fails | three-{three_jobs['failed']}-{socket.gethostname()}-root.out"
    assert "about to fail" in open(job.stdout).read()


def test_watch_shows_all_three_and_json_fields(slurm_env, three_jobs):
    watch = SlurmWatch(_client())
    asyncio.run(watch.poll())
    data = watch.to_json()
    assert data["error"] is None and data["source"] == "squeue" and data["user"] == "root"
    states = {j["job_id"]: (j["state"], j["exit_code"], j["reason"]) for j in data["jobs"]}
    assert states[three_jobs["running"]] == ("RUNNING", None, None)
    assert states[three_jobs["pending"]] == ("PENDING", None, "Resources")
    assert states[three_jobs["failed"]] == ("FAILED", 3, "NonZeroExitCode")
    order = [j["job_id"] for j in data["jobs"]]
    assert order.index(three_jobs["running"]) < order.index(three_jobs["pending"]) < order.index(three_jobs["failed"])


def test_json_queue_of_the_real_22_05(slurm_env, three_jobs):
    """queue_format = "json" on 22.05 (openapi v0.0.38 output) gives the same jobs as the text form."""
    client = SlurmClient(LocalRunner(), SlurmConfig(user="root", queue_format="json"))
    read = asyncio.run(client.queue())
    assert read.source == "squeue-json" and read.error is None, (read.error, read.problems)
    text = asyncio.run(_client().queue())
    # 22.05's JSON also lists jobs that ended (the text form leaves them out): compare the queued ones.
    queued = [j for j in read.jobs if not j.is_ended]
    assert {j.job_id: (j.state, j.nodes, j.reason, j.time_limit_s, j.stdout) for j in queued} == \
        {j.job_id: (j.state, j.nodes, j.reason, j.time_limit_s, j.stdout) for j in text.jobs}
    assert three_jobs["running"] in {j.job_id for j in queued}
    (failed,) = [j for j in read.jobs if j.job_id == three_jobs["failed"]]
    assert failed.state == "FAILED" and failed.exit_code == 3


def test_scancel_from_gpuwatch_ends_the_job_and_the_watch_sees_it_end(slurm_env, slurm_cluster, three_jobs):
    c = slurm_cluster
    victim = c.sbatch("--job-name=victim", "--dependency=afterany:" + three_jobs["running"], script="sleep 300")
    client = _client()
    watch = SlurmWatch(client)
    asyncio.run(watch.poll())
    # Its reason is Dependency or Resources (the scheduler checks both, in either order).
    assert victim in watch.queue and watch.queue[victim].reason in ("Dependency", "Resources")
    # scancel --signal on a pending job would wait for it to start: gpuwatch refuses it up front.
    with pytest.raises(CancelRefused, match="pending"):
        plan_cancel(watch.queue[victim], "local", signal="TERM")
    plan = plan_cancel(watch.queue[victim], "local")
    assert plan.argv == ("scancel", "--", victim)
    result = asyncio.run(client.run_plan(plan))
    assert result.ok, result.failure()
    c.wait_state(victim, {"CANCELLED"}, 15)
    asyncio.run(watch.poll())
    assert victim not in watch.queue
    final = watch.ended[victim][0]
    assert final.state == "CANCELLED" and final.is_ended


def test_scancel_full_ends_a_running_batch_job(slurm_env, slurm_cluster, three_jobs):
    c = slurm_cluster
    client = _client()
    watch = SlurmWatch(client)
    asyncio.run(watch.poll())
    plan = plan_cancel(watch.queue[three_jobs["running"]], "local", signal="TERM", full=True)
    assert plan.argv == ("scancel", "--signal=TERM", "--full", "--", three_jobs["running"])
    result = asyncio.run(client.run_plan(plan))
    assert result.ok, result.failure()
    state = c.wait_state(three_jobs["running"], {"CANCELLED", "FAILED", "COMPLETED"}, 20)
    assert state in ("CANCELLED", "FAILED")  # the script died of SIGTERM
    finals, _ = asyncio.run(client.final_states([three_jobs["running"]]))
    assert finals[0].is_ended and finals[0].exit_signal == 15
    asyncio.run(watch.poll())
    assert watch.ended[three_jobs["running"]][0].exit_signal == 15



def test_a_held_array_is_one_line_and_cancelling_it_leaves_no_ghost(slurm_env, slurm_cluster):
    c = slurm_cluster
    array = c.sbatch("--array=1-4", "--hold", "--job-name=sweep", script="true")
    client = _client()
    watch = SlurmWatch(client)
    asyncio.run(watch.poll())
    (rest,) = [j for j in watch.queue.values() if j.array_job_id == array]
    assert rest.job_id == f"{array}_[1-4]" and rest.is_pending and rest.reason == "JobHeldUser"
    plan = plan_cancel(rest, "local")
    assert plan.argv == ("scancel", "--", f"{array}_[1-4]")
    assert asyncio.run(client.run_plan(plan)).ok
    assert wait_for(lambda: c.job_state(array) == "CANCELLED", 15)
    asyncio.run(watch.poll())
    assert rest.job_id not in watch.queue and rest.job_id not in watch.ended  # not a job that "ended UNKNOWN"

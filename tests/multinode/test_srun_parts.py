"""Under srun a run's parts differ: the batch script (and srun) carry the batch step's SLURM_PROCID=0 and
hold the one log (srun pipes every task's output into it), while each node's ranks write to a pipe. The
join must not take the script for rank 0, must lead with the part that has the log, and must not call the
run stalled because a log-less part shows no progress while the log moves."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.multinode import MultiNodeJobs, PartFacts, rank_processes
from gpuwatch_tui.views import JobView

from tests.jobs.procs import proc

SLURM = {"SLURM_JOB_ID": "7", "SLURM_NODEID": "0"}


def with_env(p, **env):
    return dataclasses.replace(p, dist=tuple(sorted(env.items())))


def script_procs():
    script = with_env(proc(10, 1, ["/bin/sh", "/spool/d-gwnode1/job00007/slurm_script"], name="slurm_script",
                           is_python=False), SLURM_PROCID="0", **SLURM)
    srun = with_env(proc(11, 10, ["srun", "--ntasks-per-node=1", "torchrun"], name="srun", is_python=False),
                    SLURM_PROCID="0", **SLURM)
    return (script, srun)


def rank_proc(pid, rank, node):
    return with_env(proc(pid, pid - 1, ["/venv/bin/python", "-u", "train.py"], stdout=None),
                    RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE="2", SLURM_JOB_ID="7", SLURM_NODEID=str(node),
                    SLURM_PROCID=str(node))


def test_the_batch_script_and_srun_are_no_ranks_but_a_python_srun_task_is():
    assert rank_processes(script_procs()) == []
    task = with_env(proc(20, 19, ["/venv/bin/python", "train.py"]), SLURM_PROCID="3", **SLURM)
    assert rank_processes([*script_procs(), task]) == [task]


def view(id_, host, phase, logs=(), detail=None):
    return JobView(id=id_, name=id_, host=host, phase=phase, detail=detail, since=0.0, confidence=0.8,
                   evidence=(f"{phase} on {host}",), advice="", actions=(), pids=(), gpus=(), logs=logs, alive=True)


def test_the_part_with_the_log_leads_and_a_logless_no_progress_part_does_not_stall_the_run():
    log = ("/jobs/ddp-7-node-a.out",)
    parts = [
        PartFacts(view("r0", "gwnode1", "stalled", detail="no-progress"), (rank_proc(31, 0, 0),), frozenset({31}),
                  (), None),
        PartFacts(view("batch", "gwnode1", "training", logs=log), script_procs(), frozenset({10, 11}), (), 100.0),
        PartFacts(view("r1", "gwnode2", "stalled", detail="no-progress"), (rank_proc(41, 1, 1),), frozenset({41}),
                  (), None),
    ]
    (joined,), _ = MultiNodeJobs().combine(parts, 101.0)
    assert joined.name == "batch" and joined.logs == log  # the log people read, and slurm-<id> for scancel
    assert [(r.rank, r.host) for r in joined.ranks] == [(0, "gwnode1"), (1, "gwnode2")]
    assert joined.phase == "training", joined
    # Without a part that has a log, the parts' own verdicts stand.
    (alone,), _ = MultiNodeJobs().combine([parts[0], parts[2]], 101.0)
    assert alone.phase == "stalled"

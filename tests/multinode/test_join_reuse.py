"""Each per-host job keeps its run facts (`run_facts`: processes, run keys, ranked) while its revision holds
(no frame of its host since), and its keys while its processes' run variables hold: every joined list the
tracker hands out equals the join of the same views with facts made from scratch. Two hosts of one
torchrun run and a third host's run of its own, whose second rank on each host shows up, then stops, then
is gone: the processes (and so the run keys, the ranks) change under the same jobs. (Checked by hand: facts kept past a frame fail here.)"""

from __future__ import annotations

import dataclasses
import json

from gpuwatch_tui.jobs.multinode import MultiNodeJobs, run_facts
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker

from tests.jobs.procs import sample, torchrun_tree

T0 = 1_796_000_000.0


def frame(host_index: int, i: int):
    procs, gpus = torchrun_tree(cpu=10.0 + i)
    env = {"LOCAL_RANK": "0", "WORLD_SIZE": "4", "GROUP_RANK": str(host_index), "MASTER_ADDR": "node-a",
           "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "run-7"}
    if host_index == 2:  # a run of its own on one host: no run key, ranked once its second rank shows up
        env = {"WORLD_SIZE": "2", "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
               "TORCHELASTIC_RUN_ID": "none"}
    for local, pid in enumerate((101, 102)):
        dist = {**env, "RANK": str(2 * (host_index % 2) + local), "LOCAL_RANK": str(local)}
        procs[pid] = dataclasses.replace(procs[pid], dist=tuple(sorted(dist.items())), start_ticks=4200 + pid,
                                         state="T" if pid == 102 and 8 <= i < 11 else "R")
    if i < 4 or i >= 11:
        procs.pop(102)  # the second rank shows up on the fifth frame and is gone on the twelfth
    return sample(T0 + i, procs, gpus)


def fresh_run_facts(job):
    """`run_facts` made from scratch, leaving what the job keeps for it as it was."""
    kept = job.view_parts.pop("run_facts", None)
    try:
        return run_facts(job)
    finally:
        job.view_parts.pop("run_facts", None)
        if kept is not None:
            job.view_parts["run_facts"] = kept


def test_the_join_with_kept_keys_equals_one_with_nothing_kept():
    tracker = JobTracker(JobSettings(stall_after_s=5))
    reference = MultiNodeJobs()  # the same join, fed run facts made with nothing kept
    joined = ranked = 0
    for i in range(14):
        now = T0 + i
        for h, host in enumerate(("node-a", "node-b", "node-c")):
            tracker.update(host, frame(h, i), now)
        for when in (now, now + 0.5):  # the second call finds no frame since
            views = tracker.views(when)
            unjoined = tracker.views(when, joined=False)
            expected = reference.join(unjoined, tracker, when, [fresh_run_facts(tracker.state(v.id)) for v in unjoined])
            assert views == expected, (i, when)
            assert [json.dumps(v.to_json()) for v in views] == [json.dumps(v.to_json()) for v in expected]
            joined += sum(len(v.parts) > 1 for v in views)
            ranked += sum(len(v.ranks) == 2 for v in views if v.host == "node-c")
    assert joined >= 20  # the run was one job over both hosts on most frames
    assert ranked >= 10  # node-c's job was judged over its two ranks while both were there

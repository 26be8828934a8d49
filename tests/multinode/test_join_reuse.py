"""The join keeps each per-host job's run keys while its revision holds (no frame of its host since):
every joined list it hands out equals the join of the same views made with nothing kept. Two hosts of one
torchrun run whose second rank on each host shows up, then stops, then is gone: the processes change
under the same jobs. (Checked by hand: a join that keeps the keys past a frame fails here.)"""

from __future__ import annotations

import dataclasses
import json

from gpuwatch_tui.jobs.multinode import MultiNodeJobs
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker

from tests.jobs.procs import sample, torchrun_tree

T0 = 1_796_000_000.0


def frame(host_index: int, i: int):
    procs, gpus = torchrun_tree(cpu=10.0 + i)
    env = {"LOCAL_RANK": "0", "WORLD_SIZE": "4", "GROUP_RANK": str(host_index), "MASTER_ADDR": "node-a",
           "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "run-7"}
    for local, pid in enumerate((101, 102)):
        dist = {**env, "RANK": str(2 * host_index + local), "LOCAL_RANK": str(local)}
        procs[pid] = dataclasses.replace(procs[pid], dist=tuple(sorted(dist.items())), start_ticks=4200 + pid,
                                         state="T" if pid == 102 and 8 <= i < 11 else "R")
    if i < 4 or i >= 11:
        procs.pop(102)  # the second rank shows up on the fifth frame and is gone on the twelfth
    return sample(T0 + i, procs, gpus)


def test_the_join_with_kept_keys_equals_one_with_nothing_kept():
    tracker = JobTracker(JobSettings(stall_after_s=5))
    reference = MultiNodeJobs()  # the same join, its kept keys dropped before every call
    joined = 0
    for i in range(14):
        now = T0 + i
        for h, host in enumerate(("node-a", "node-b")):
            tracker.update(host, frame(h, i), now)
        for when in (now, now + 0.5):  # the second call finds no frame since
            views = tracker.views(when)
            reference._keys = {}
            expected = reference.join(tracker.views(when, joined=False), tracker, when)
            assert views == expected, (i, when)
            assert [json.dumps(v.to_json()) for v in views] == [json.dumps(v.to_json()) for v in expected]
            joined += sum(len(v.parts) > 1 for v in views)
    assert joined >= 20  # the run was one job over both hosts on most frames

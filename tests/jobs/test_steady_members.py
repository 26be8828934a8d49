"""A steady frame skips re-checking job members that were all there last frame: the result must be the
same as checking them every frame. Two trackers get the same frames; one never skips."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ExitInfo

from .procs import gpu, sample, torchrun_tree

HOST = "gpu1"


class NeverSteady(dict):
    """A tracker's memory of the last frame that never matches: every member is checked every frame."""

    def get(self, key, default=None):
        return None


def _state(tr: JobTracker, now: float) -> list:
    return [(j.id, dict(j.missing), dict(j.exit_infos), j.exit) for j in tr.states(HOST)] + [tr.to_json(now)]


def test_skipped_member_checks_equal_checking_every_frame():
    fast, full = JobTracker(), JobTracker()
    full._last_frame = NeverSteady()
    checked = {"fast": 0, "full": 0}
    from gpuwatch_tui.jobs import tracker as tracker_module

    real = tracker_module.track_members

    def counting(job, *args):
        checked["fast" if any(job is j for j in fast.states(HOST)) else "full"] += 1
        return real(job, *args)

    tracker_module.track_members = counting
    try:
        frames = []
        for i in range(6):  # steady training
            frames.append(torchrun_tree(cpu=10.0 + i, util=95.0))
        procs, gpus = torchrun_tree(cpu=20.0)
        frames.append(({**procs, 102: dataclasses.replace(procs[102], state="Z")}, gpus))  # a rank exits
        frames.append(({**procs, 102: dataclasses.replace(procs[102], state="Z")}, gpus))
        for i in range(3):  # steady again, then a rank gone without a word
            frames.append(torchrun_tree(cpu=21.0 + i))
        procs, gpus = torchrun_tree(cpu=30.0)
        without = {k: v for k, v in procs.items() if k != 101}
        frames += [(without, gpus)] * 3
        frames += [({}, [gpu(0, []), gpu(1, [])])] * 3  # every process gone: the job ends
        frames += [torchrun_tree(cpu=40.0 + i) for i in range(4)]  # a new run of the same tree
        t = 0.0
        for procs, gpus in frames:
            gone = []
            if not procs:
                gone = [ExitInfo(100, procs_start(100), t - 0.5, exit_code=1)]
            for tr in (fast, full):
                tr.update(HOST, sample(t, procs, gpus, gone=gone), now=t)
            assert _state(fast, t) == _state(full, t), t
            t += 1.0
    finally:
        tracker_module.track_members = real
    assert checked["full"] - checked["fast"] >= 5  # the skip really happened, in the steady stretches


def procs_start(pid: int) -> float:
    procs, _ = torchrun_tree()
    return procs[pid].start_time

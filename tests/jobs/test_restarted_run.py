"""A restarted run writes into the log its old run wrote: the old run's lines, then the restart's marker line,
then its own. Read from its start, the new run's tail must not take the old run's training for its own."""

from __future__ import annotations

import time

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.rules import RuleSet
from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ExitInfo, TailChunk

from .procs import LOG, gpu, proc, sample

OLD_LINES = [f" {p}%|#         | {p * 10}/1000 [01:00<09:00, 1.67it/s]" for p in (10, 11, 12)]


def marker(when: float, old_pid: int) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    return f"=== gpuwatch: restarted with -u at {stamp} by alice (was pid {old_pid}) ==="


def test_a_marker_dated_before_the_run_started_forgets_the_earlier_runs_lines():
    interp = LogInterpreter(RuleSet.with_user_rules())
    interp.run_started_at = 2000.0
    interp.feed_lines([*OLD_LINES, "Traceback (most recent call last):", "ValueError: boom", marker(1990.0, 5)], 1.0)
    assert interp.hint is None and interp.progress.current.step is None and interp.failure is None
    assert interp.restart_marker is not None and interp.restart_marker.old_pid == 5
    interp.feed_line("Loading checkpoint shards:  50%|#####     | 2/4 [00:01<00:01,  1.00it/s]", 2.0)
    assert interp.hint.phase == "loading"


def test_the_run_the_marker_ended_keeps_what_it_read():
    interp = LogInterpreter(RuleSet.with_user_rules())
    interp.run_started_at = 1500.0  # started before the restart: the marker ends this run
    interp.feed_lines([*OLD_LINES, marker(1990.0, 5)], 1.0)
    assert interp.hint.phase == "training" and interp.progress.current.step == 120


def _tail(tracker, data):
    return [TailChunk(k, LOG.path, data, False, 0, len(data), None, None) for k in tracker.wanted("gpu1").tails]


def test_a_configured_jobs_restarted_run_is_starting_during_its_init_not_training():
    tr = JobTracker(JobSettings(stall_after_s=300, jobs=(JobSpec("trainer", "gpu1", match="train.py"),)))
    old = proc(101, 1, ["python", "train.py"], cpu=10.0, start=1000.0)
    tr.update("gpu1", sample(1000.0, {101: old}, [gpu(0, [101], 99.0, 690.0)], matches={"cfg0": [101]}), now=1000.0)
    data = ("\n".join(OLD_LINES) + "\n").encode()
    tr.update("gpu1", sample(1005.0, {101: old}, [gpu(0, [101], 99.0, 690.0)], tails=_tail(tr, data),
                             matches={"cfg0": [101]}), now=1005.0)
    assert tr.views(1005.0)[0].phase == "training"
    gone = [ExitInfo(101, old.start_time, 1010.0)]
    tr.update("gpu1", sample(1010.0, {}, [gpu(0, [])], gone=gone, matches={"cfg0": []}), now=1010.0)
    assert not tr.views(1010.0)[0].alive
    # The restart: its marker dated 1011, the new run started at 1012 and still initialising (GPU context, no work).
    new = proc(201, 1, ["python", "-u", "train.py"], cpu=1.0, start=1012.0)
    frame = {201: new}
    tr.update("gpu1", sample(1013.0, frame, [gpu(0, [201])], matches={"cfg0": [201]}), now=1013.0)
    shared_log = data + (marker(1011.0, 101) + "\n").encode()  # the tail of the new run starts back in the old one
    tr.update("gpu1", sample(1014.0, frame, [gpu(0, [201])], tails=_tail(tr, shared_log), matches={"cfg0": [201]}),
              now=1014.0)
    [view] = tr.views(1014.0)
    assert view.alive and view.pids == (201,)
    assert view.phase == "starting", (view.phase, view.evidence)
    assert view.progress.step is None


def test_a_configured_jobs_new_run_seen_as_the_old_one_vanishes_takes_its_place_not_a_second_slot():
    # A watcher's frame can show the old run gone and the restarted run at once: the old run ends, then the new one
    # is the same job (not `trainer#2`).
    tr = JobTracker(JobSettings(stall_after_s=300, jobs=(JobSpec("trainer", "gpu1", match="train.py"),)))
    old = proc(101, 1, ["python", "train.py"], start=1000.0)
    for t in (1000.0, 1002.0):
        tr.update("gpu1", sample(t, {101: old}, [gpu(0, [101])], matches={"cfg0": [101]}), now=t)
    new = proc(201, 1, ["python", "-u", "train.py"], start=1003.0)
    gone = [ExitInfo(101, old.start_time, 1004.0)]
    tr.update("gpu1", sample(1004.0, {201: new}, [gpu(0, [201])], gone=gone, matches={"cfg0": [201]}), now=1004.0)
    for t in (1006.0, 1008.0):
        tr.update("gpu1", sample(t, {201: new}, [gpu(0, [201])], matches={"cfg0": [201]}), now=t)
    [view] = tr.views(1008.0)
    assert (view.id, view.name, view.pids, view.alive) == ("cfg0", "trainer", (201,), True)
    assert [h.phase for h in view.history][-2:-1] in (["finished"], ["crashed"]), view.history

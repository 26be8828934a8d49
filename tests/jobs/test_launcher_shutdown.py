"""A launcher tearing its workers down writes lines ("Received 15 death signal", "Sending process N closing
signal SIGTERM", deepspeed's "Killing subprocess N"): they are no sign of the job working, so a job that had
gone silent stays silent through them instead of reading as `training` again."""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.rules import RuleSet
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import TailChunk

from .procs import LOG, sample, torchrun_tree

# As published: torchrun's agent (torch 1.x logging and 2.x glog-style prefixes), deepspeed's launcher,
# Lightning's signal connector.
SHUTDOWN_LINES = [
    "[2023-05-10 08:12:01,532] torch.distributed.elastic.agent.server.api: [WARNING] Received 15 death signal, "
    "shutting down workers",
    "W0510 08:12:01.532000 139871 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM "
    "death signal, shutting down workers",
    "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 51208 closing signal SIGTERM",
    "W0510 08:12:01.533000 139871 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 51209 "
    "closing signal SIGTERM",
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -15) local_rank: 0 (pid: 51208) of "
    "binary: /usr/bin/python3",
    "[2023-05-10 08:12:01,600] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 250632",
    "[2023-05-10 08:12:01,700] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', "
    "'--local_rank=0'] exits with return code = -15",
    "[2023-05-10 08:12:01,400] [INFO] [launch.py:290:sigkill_handler] Main process received SIGTERM, exiting",
    "[rank: 0] Received SIGTERM: 15",
]


@pytest.mark.parametrize("line", SHUTDOWN_LINES)
def test_each_launcher_shutdown_line_is_read_as_one(line):
    interp = LogInterpreter(RuleSet.with_user_rules())
    interp.feed_line(line, 1.0)
    assert interp.shutdown_lines == 1
    assert interp.hint is None and interp.progress.current.step is None


def test_training_lines_are_not_shutdown_lines():
    interp = LogInterpreter(RuleSet.with_user_rules())
    for line in (" 10%|#         | 100/1000 [01:00<09:00, 1.67it/s]", "step 120 loss 2.31",
                 "Received a batch of 32 samples", "Sending process group barrier"):
        interp.feed_line(line, 1.0)
    assert interp.shutdown_lines == 0


def _frame(tracker, t, cpu, data=b""):
    # CPU busy, GPUs idle: a job past its stall threshold with a quiet log reads silent (cpu-busy).
    procs, gpus = torchrun_tree(cpu=cpu, util=0.0, power=119.0)
    tails = [TailChunk(k, LOG.path, data, False, 0, None, None, None) for k in tracker.wanted("gpu1").tails] if data else []
    tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
    [view] = tracker.views(t)
    return view


def test_a_silent_job_stays_silent_through_its_launchers_shutdown_lines_and_not_through_real_lines():
    tr = JobTracker(JobSettings(stall_after_s=60))
    _frame(tr, 0.0, 10.0)
    _frame(tr, 5.0, 15.0, b" 10%|#         | 100/1000 [01:00<09:00, 1.67it/s]\n")
    t, cpu = 5.0, 15.0
    while t < 80.0:  # one busy core, nothing logged for 75 s
        t, cpu = t + 5.0, cpu + 5.0
        view = _frame(tr, t, cpu)
    assert (view.phase, view.detail) == ("silent", "cpu-busy")
    # (The lines that say nothing else: "Received 15 death signal" is read as a signal too, a crash.)
    shutdown = "\n".join(SHUTDOWN_LINES[1:4]).encode() + b"\n"
    view = _frame(tr, t + 1.0, cpu + 1.0, shutdown)
    assert (view.phase, view.detail) == ("silent", "cpu-busy"), view.evidence
    view = _frame(tr, t + 2.0, cpu + 2.0)
    assert (view.phase, view.detail) == ("silent", "cpu-busy"), view.evidence
    # A line of the job's own ends the silence (so the check above can fail).
    view = _frame(tr, t + 3.0, cpu + 3.0, b" 11%|#         | 110/1000 [01:10<09:00, 1.67it/s]\n")
    assert view.phase == "training"

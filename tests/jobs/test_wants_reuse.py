"""The tracker hands back the same ProbeWants (and parent list) while nothing they are made of changed.

Every frame of a run with churn (ranks held back for their launcher, the launcher's comm changing,
a configured job found, a restart awaited, a job ending and its log followed for 30 s after, a
dismissal) is checked: the reused wants and parents must equal those built afresh, and steady frames
must really reuse them (the same object), or the check proves nothing.
"""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.discovery import gpu_pids_of, parents_to_watch
from gpuwatch_tui.jobs.settings import JobSettings, JobSpec
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import HostSample

from .procs import gpu, proc, sample, torchrun_tree

HOST = "gpu1"


class Checked:
    """Feeds a tracker and checks its reused wants and parents against fresh ones after every frame."""

    def __init__(self, tracker: JobTracker) -> None:
        self.tr = tracker
        self.last = None
        self.reused = 0

    def frame(self, t: float, s: HostSample) -> None:
        self.tr.update(HOST, s, now=t)
        fresh_parents = parents_to_watch(s.procs, [*gpu_pids_of(s.gpus), *s.candidates])
        assert self.tr._parents[HOST] == fresh_parents, t
        wants = self.tr.wanted(HOST)
        assert wants == self.tr._build_wants(HOST), t
        assert self.tr.wanted(HOST) is wants  # asked twice in a frame: built once
        self.reused += wants is self.last
        self.last = wants


def _tail_keys(c: Checked) -> set[str]:
    return set(c.last.tails)


def test_reused_wants_and_parents_equal_fresh_ones_through_a_run_with_churn():
    spec = JobSpec("pretrain", HOST, match=r"pretrain\.py", logs=("logs/out.log",), output_dir="/data/ckpt")
    c = Checked(JobTracker(JobSettings(jobs=(spec,))))
    t = 0.0
    # Ranks first, their launcher unknown: held back, its pid asked for.
    ranks, gpus = torchrun_tree(with_agent=False)
    for _ in range(2):
        c.frame(t, sample(t, ranks, gpus))
        t += 1
    assert 100 in c.last.pids
    # The launcher shows up (as a plain python first, then with its agent comm): one job.
    procs, gpus = torchrun_tree()
    procs[100] = dataclasses.replace(procs[100], name="python3")
    c.frame(t, sample(t, procs, gpus))
    t += 1
    procs, gpus = torchrun_tree()
    for i in range(5):  # steady: CPU and GPU figures move, nothing the wants read does
        procs, gpus = torchrun_tree(cpu=10.0 + i, util=90.0 + i)
        c.frame(t, sample(t, procs, gpus))
        t += 1
    steady = c.reused
    assert steady >= 4
    # A third rank joins the job (no new job record: only its members grow).
    procs, gpus = torchrun_tree(cpu=20.0)
    procs[103] = dataclasses.replace(procs[102], pid=103, start_time=procs[102].start_time + 1)
    gpus = [*gpus, gpu(3, [103])]
    for _ in range(2):
        c.frame(t, sample(t, procs, gpus))
        t += 1
    assert 103 in c.last.pids
    # The launcher's comm changes while its cmdline does not (the chain above the ranks reads the comm).
    for name in ("run", "python3", "pt_elastic"):
        renamed = {**procs, 100: dataclasses.replace(procs[100], name=name, cmdline=("/opt/run",), is_python=False)}
        c.frame(t, sample(t, renamed, gpus))
        t += 1
    # A configured job is matched: its log and output dir are wanted.
    mine = proc(200, 1, ["python", "pretrain.py"], cpu=5.0)
    both = {**procs, 200: mine}
    for i in range(3):
        c.frame(t, sample(t, both, [*gpus, gpu(2, [200])], matches={"cfg0": [200]}))
        t += 1
    assert "/data/ckpt" in c.last.dirs.values() and "/work/run/logs/out.log" in c.last.tails.values()
    # A restart is awaited: its pid is wanted until it shows up or the wait expires.
    [discovered] = [j for j in c.tr.states(HOST) if j.spec is None]
    c.tr.expect_successor(discovered.id, HOST, 900, 0, None, now=t, within_s=3.0)
    assert 900 in c.tr.wanted(HOST).pids
    for i in range(5):
        c.frame(t, sample(t, both, [*gpus, gpu(2, [200])], matches={"cfg0": [200]}))
        t += 1
    assert 900 not in c.last.pids
    # The torchrun job ends: its log is still followed for 30 s, then no more.
    alone = {200: mine}
    ended_at = t
    c.frame(t, sample(t, alone, [gpu(2, [200])], matches={"cfg0": [200]}))
    t += 1
    follow = _tail_keys(c)
    while t < ended_at + 40:
        c.frame(t, sample(t, alone, [gpu(2, [200])], matches={"cfg0": [200]}))
        t += 1
    assert _tail_keys(c) < follow  # the ended job's log was dropped, on time (checked every frame)
    # Between frames: a second configured job is added, the live one dismissed (it starts over).
    c.tr.add_spec(JobSpec("eval", HOST, match=r"eval\.py"), now=t)
    assert c.tr.wanted(HOST) == c.tr._build_wants(HOST) and "cfg1" in c.tr.wanted(HOST).matches
    assert c.tr.dismiss("cfg0")
    assert c.tr.wanted(HOST) == c.tr._build_wants(HOST) and 200 not in c.tr.wanted(HOST).pids
    c.frame(t, sample(t, alone, [gpu(2, [200])], matches={"cfg0": [200]}))
    assert c.reused > steady


def test_a_dismissed_discovered_job_leaves_the_wants_at_once():
    c = Checked(JobTracker())
    for t in range(3):
        procs, gpus = torchrun_tree(cpu=10.0 + t)
        c.frame(float(t), sample(float(t), procs, gpus))
    [job] = c.tr.states(HOST)
    assert 101 in c.last.pids and c.last.tails
    assert c.tr.dismiss(job.id)
    assert c.tr.wanted(HOST) == c.tr._build_wants(HOST) and 101 not in c.tr.wanted(HOST).pids

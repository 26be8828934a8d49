"""observe's per-frame shortcuts read what the full scan reads.

A job's GPU readings come from the frame's pid -> GPU map; where every GPU of the frame sits at the
position its index says, the GPU at a held index is read without looking through its processes
again (judging._positional, asked once per frame's GPU list). Compared here, frame by frame, with
the full scan: every GPU of the frame whose process list names one of the job's processes or their
children. The frames alternate between positional ones and ones whose indices are not positions
(a host showing GPUs 3 and 1 only; an index listed twice), so a shortcut taken on the wrong frame,
or an answer kept from another frame's GPU list, reads another GPU or none.
"""

from __future__ import annotations

from gpuwatch_tui.jobs.observation import GpuReading
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ChildProc

from .procs import gpu, proc, sample, torchrun_tree

HOST = "h1"


def _frames():
    """(time, procs, gpus) of a torchrun job whose ranks and one data worker hold GPUs, in shapes
    that alternate between positional and not."""
    for i in range(24):
        t = 1001.0 + i
        procs, _ = torchrun_tree(cpu=10.0 + 2.0 * i)
        r0 = procs[101]
        worker = ChildProc(300, "pt_data_worker", ("python3",), "S", 1.0 + i)
        procs[101] = proc(101, 100, list(r0.cmdline), cpu=r0.cpu_s, children=(worker,), unbuffered=True)
        util, power = 90.0 + i % 7, 600.0 + 5 * i
        shape = i % 4
        if shape == 0:  # positional: ranks on 0 and 1, the worker on 2, someone else's process on 3
            gpus = [gpu(0, [101], util, power), gpu(1, [102], util, power), gpu(2, [300], util, power),
                    gpu(3, [999], util, power)]
        elif shape == 1:  # only GPUs 3 and 1 visible, in that order
            gpus = [gpu(3, [102], util, power), gpu(1, [101, 300], util, power)]
        elif shape == 2:  # positional, the worker's GPU shared with a rank
            gpus = [gpu(0, [101, 300], util, power), gpu(1, [102], util, power)]
        else:  # index 0 listed twice: the second time for someone else's process
            gpus = [gpu(0, [101], util, power), gpu(1, [102], util, power), gpu(0, [999], util, power)]
        yield t, procs, gpus


def _scanned(job, procs, gpus) -> list[GpuReading]:
    """The job's readings by the full scan: every GPU naming one of its processes or their children."""
    pids = set(job.members)
    for pid in job.members:
        pids.update(c.pid for c in procs[pid].children)
    return [GpuReading(g.index, g.util_pct, g.mem_used_mib, g.power_w, g.power_limit_w)
            for g in gpus if any(gp.pid in pids for gp in g.processes)]


def test_gpu_readings_equal_the_full_scan_on_every_frame_shape():
    tracker = JobTracker()
    held: set[int] = set()
    compared = 0
    for t, procs, gpus in _frames():
        tracker.update(HOST, sample(t, procs, gpus), now=t)
        for job in tracker.states(HOST):
            if not job.samples or job.samples[-1].time != t:
                continue
            want = _scanned(job, procs, gpus)
            assert list(job.samples[-1].gpus) == want, t
            held.update(r.index for r in want)
            assert job.gpus == tuple(sorted(held))
            compared += 1
    assert compared >= 20  # the job was read on (nearly) every frame, in all four shapes
    assert held == {0, 1, 2, 3}


def test_feed_and_take_equals_feed_tick_take_and_live():
    """The wiring's one call per chunk (LogBuffer.feed_and_take) leaves the buffer and hands on what
    feed, tick, take_new_texts and live do: whole lines, an unterminated line that goes stale and is
    shown, then continued, progress-bar frames, a reset and skipped bytes."""
    from gpuwatch_tui.jobs.logtail import LogBuffer
    from gpuwatch_tui.model import TailChunk

    pieces = [b"step 1 loss 2.0\nstep 2 loss 1.9\n", b"loading shard 3", b"", b"", b"", b" done\n",
              b"epoch 1:  10%|#  | 10/100\r", b"epoch 1:  20%|## | 20/100\r", b"", b"", b"",
              b"epoch 1:  30%|###| 30/100\n", b"step 3 loss 1.8\n", b"tail without end", b"", b"", b"",
              b" ends\n", b"step 4 loss 1.7\nstep 5 loss 1.6\n", b"step 6 loss 1.5\n"]
    old, new = LogBuffer(partial_stale_s=2.0), LogBuffer(partial_stale_s=2.0)
    size = 0
    for i, data in enumerate(pieces):
        now = 1000.0 + i
        size += len(data)
        reset, skipped = i == 12, 64 if i == 13 else 0
        chunk = TailChunk("k", "/run/train.log", data, reset, skipped, size, now - 0.5, None)
        old.feed(chunk, now)
        old.tick(now)
        want = (old.take_new_texts(), old.live)
        assert new.feed_and_take(chunk, now) == want, i
        assert (new.lines(), new.total_lines, new.live, new.live_since) == (
            old.lines(), old.total_lines, old.live, old.live_since), i
        # (the shortcut for whole lines keeps the same numbers, times and file facts)
        assert (new.records(), new.size, new.mtime, new.path, new.total_bytes, new.last_growth, new.received) == (
            old.records(), old.size, old.mtime, old.path, old.total_bytes, old.last_growth, old.received), i
    assert any("loading shard 3" in line for line in old.lines())  # the stale partial was shown

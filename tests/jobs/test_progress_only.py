"""A training job whose only change is new lines that advance its progress keeps its verdict
(verdict_reuse.verdict_unchanged, progress-only frames): every verdict shown is the one judging every frame gives
(phase, detail, since, confidence, evidence with the fresh step/ETA and last-line age; the
CPU rate line is as old as on any kept frame), a line that
changes the phase (evaluating, an error, OOM, NCCL, finished) is judged on its own frame, and the
verdict is judged again at least every REJUDGE_EVERY_S."""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs import judging, verdict_reuse
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import TailChunk

from .procs import LOG, sample, torchrun_tree

STEADY = 40  # frames of progress lines before the decisive one
DECISIVE = {
    "evaluating": b"Validation: 10%|#         | 10/100 [00:01<00:09, 10.0it/s]\n",
    "error": b"RuntimeError: CUDA error: an illegal memory access was encountered\n",
    "oom": b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    "nccl": b"[rank0]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: "
            b"WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n",
    "finished": b"Training finished.\n",
    "quiet": b"",  # no line at all: the log goes quiet past stall_after
}


def run(tracker: JobTracker, decisive: bytes, judged_at: list[float]) -> list[tuple]:
    """Two GPUs training at a steady rate; one progress line a second, the decisive line (if any) at
    frame STEADY, then progress lines again (none for the quiet case). What each frame shows."""
    shown = []
    data = b""
    for i in range(STEADY + 30):
        t = 1001.0 + i
        procs, gpus = torchrun_tree(cpu=10.0 + 2.0 * i)
        if i == STEADY:
            line = decisive
        elif decisive == b"" and i > STEADY:
            line = b""
        else:
            line = f"step {40 * (i + 1)}/100000 loss {2.5 / (1 + i / 50):.4f} tokens/s 99000\n".encode()
        data += line
        tails = ([TailChunk(k, LOG.path, line, False, len(data) - len(line), len(data), None, None)
                  for k in tracker.wanted("gpu1").tails] if line else [])
        tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
        [v] = tracker.views(t)
        # The CPU line ("+4.0 cores over 12s") is the kept verdict's, as on any kept frame (its window
        # grows until it is full): the rate class it shows is compared by _unchanged, not its text.
        # So are "log silent 22s" and "last log line 3s ago" on a quiet log's kept frames (durations
        # as old as the verdict, at most REJUDGE_EVERY_S: test_rejudge.py covers those).
        stale = ("CPU ", "log silent ", "last log line ") if not line and i >= STEADY else ("CPU ",)
        evidence = tuple(e for e in v.evidence if not e.startswith(stale))
        shown.append((t, v.phase, v.detail, v.since, v.confidence, evidence))
    judged_at.append(None)  # end of this run's judgments
    return shown


@pytest.mark.parametrize("name", sorted(DECISIVE))
def test_progress_only_frames_show_the_verdicts_of_judging_every_frame(monkeypatch, judged_at, name):
    settings = JobSettings(stall_after_s=20)
    kept = run(JobTracker(settings), DECISIVE[name], judged_at)
    mine = judged_at[:-1]
    every_s = verdict_reuse.REJUDGE_EVERY_S
    monkeypatch.setattr(verdict_reuse, "REJUDGE_EVERY_S", 0.0)  # the reference: every frame judged
    every = run(JobTracker(settings), DECISIVE[name], judged_at)
    for a, b in zip(kept, every):
        assert a == b, (name, a, b)  # phase, detail, since, confidence, evidence: all of it, every frame
    decisive_t = 1001.0 + STEADY
    if name != "quiet":
        assert decisive_t in mine  # the line that changes the phase is judged on its own frame
    # Steady training with a line a second is judged every REJUDGE_EVERY_S (and when a clock of the
    # engine runs out: the young-job window, the rate window, stall_after), not every frame.
    steady = [t for t in mine if 1011.0 <= t < 1001.0 + STEADY]
    assert 0 < len(steady) <= 0.45 * (STEADY - 10), steady
    gaps = [b - a for a, b in zip(mine, mine[1:]) if a >= 1011.0]
    assert max(gaps) <= every_s  # evidence beyond the log lines is at most this old
    # The evidence shows the latest step and the last line's age of every frame, not the judged one's.
    t, _, _, _, _, evidence = kept[STEADY - 2]
    assert any(e.startswith(f"step {40 * (STEADY - 1)}/100000") for e in evidence), evidence
    assert "last log line 0.0s ago" in evidence or any(e.startswith("last log line 0") for e in evidence), evidence


def test_phases_change_as_expected():
    """The decisive lines do change the verdict (the comparison above is not between two no-ops)."""
    phases = {}
    for name, line in DECISIVE.items():
        shown = run(JobTracker(JobSettings(stall_after_s=20)), line, [])
        phases[name] = {p for _, p, *_ in shown}
    assert phases["evaluating"] >= {"training", "evaluating"}, phases
    assert phases["quiet"] >= {"training", "silent"}, phases  # GPUs busy, log quiet
    changed = [n for n in ("error", "oom", "nccl", "finished")
               if any((p, d) != ("training", None) for _, p, d, *_ in run(JobTracker(JobSettings(stall_after_s=20)),
                                                                       DECISIVE[n], [])[STEADY:STEADY + 1])]
    assert changed, phases


def test_a_stdout_file_that_grows_with_the_log_does_not_rejudge(monkeypatch, judged_at):
    """The probe reports the size of a process's stdout file again as the log grows; the engine reads
    that target's path and kind only, so a growing size keeps the verdict (judged every
    REJUDGE_EVERY_S, not every frame), and every frame shows what judging every frame gives."""
    import dataclasses

    from gpuwatch_tui.model import FdTarget

    def frames(tracker, judged):
        shown, data = [], b""
        for i in range(40):
            t = 1001.0 + i
            procs, gpus = torchrun_tree(cpu=10.0 + 2.0 * i)
            line = f"step {40 * (i + 1)}/100000 loss {2.5 / (1 + i / 50):.4f} tokens/s 99000\n".encode()
            data += line
            out = FdTarget(LOG.path, "file", append=True, size=len(data))  # as the probe re-reads it
            procs = {pid: dataclasses.replace(p, stdout=out, stderr=out) if p.stdout is not None else p
                     for pid, p in procs.items()}
            tails = [TailChunk(k, LOG.path, line, False, len(data) - len(line), len(data), None, None)
                     for k in tracker.wanted("gpu1").tails]
            tracker.update("gpu1", sample(t, procs, gpus, tails=tails), now=t)
            [v] = tracker.views(t)
            shown.append((v.phase, v.detail, v.since, v.confidence,
                          tuple(e for e in v.evidence if not e.startswith("CPU "))))
        judged.append(None)
        return shown

    kept = frames(JobTracker(JobSettings(stall_after_s=20)), judged_at)
    steady = [t for t in judged_at[:-1] if 1016.0 <= t < 1041.0]  # past the young-job clocks
    monkeypatch.setattr(verdict_reuse, "REJUDGE_EVERY_S", 0.0)
    every = frames(JobTracker(JobSettings(stall_after_s=20)), [])
    assert kept == every
    assert {p for p, *_ in kept[15:]} == {"training"}
    assert 0 < len(steady) <= 0.45 * 25, steady

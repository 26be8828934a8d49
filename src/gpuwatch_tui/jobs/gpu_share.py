"""A job's reading of a GPU it shares with other jobs: its own processes' share, not the whole GPU's.

Four jobs on one H200, each judged by the whole GPU's utilisation, read a first torch.compile as training
and a hung job as busy while a neighbour trained. Where the probe read each process's SM share (a GPU with
more than one process), the job's reading carries its own processes' SM % as its utilisation (and their
memory as its memory), with the whole GPU's utilisation beside it for the evidence. The GPU's power and GPM
counters stay the whole GPU's: where they say "idle" or "waiting" they say it of every job on it.
A job alone on its GPU (every process on it the job's) is read as before.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Collection, Iterable, Mapping

from ..model import GpuSample
from .observation import GpuReading

# A job whose processes hold at least this SM share of a shared GPU is working there (a held context, a
# Python hang, a compile between its few kernels: ~0 %). The engine's idle line.
ACTIVE_SHARE_PCT = 10.0


def gpu_owners(gpus: Iterable[GpuSample], jobs: Iterable) -> dict[int, int] | None:
    """pid -> the position of its job among `jobs`, for the pids on GPUs with more than one process (a
    job's members and their children); None where no GPU has more than one (the usual frame)."""
    shared = None
    for g in gpus:
        if len(g.processes) > 1:
            if shared is None:
                shared = set()
            shared.update(p.pid for p in g.processes)
    if shared is None:
        return None
    owners: dict[int, int] = {}
    for n, job in enumerate(jobs):
        for pid in job.members:
            if pid in shared:
                owners[pid] = n
        for p in job.procs:
            for c in p.children:
                if c.pid in shared:
                    owners.setdefault(c.pid, n)
    return owners


def shared_reading(reading: GpuReading, gpu: GpuSample, mine: Collection[int], also: Collection[int],
                   owners: Mapping[int, int] | None) -> GpuReading:
    """`reading` of `gpu` as the job with pids `mine` and `also` (its main processes and their children)
    sees it: unchanged where no other process holds the GPU; else, where the probe read each process's SM
    share, its util is what its own share stands for (below), with the GPU's util, its own share and the
    other jobs counted beside it; where not read, the whole GPU's figures, marked shared."""
    own, others = [], []
    for p in gpu.processes:
        (own if p.pid in mine or p.pid in also else others).append(p)
    if not others or not own:
        return reading
    # the other jobs' shares (a process of no known job is one of its own)
    theirs: dict = {}
    for p in others:
        owner = None if owners is None else owners.get(p.pid)
        key = ("pid", p.pid) if owner is None else owner
        theirs[key] = None if p.sm_pct is None or theirs.get(key, 0.0) is None else theirs.get(key, 0.0) + p.sm_pct
    shares = [p.sm_pct for p in own]
    if any(s is None for s in shares):
        return replace(reading, shared_with=len(theirs))  # not read (yet): the whole GPU's, said so
    share = min(100.0, float(sum(shares)))
    mems = [p.mem_used_mib for p in own]
    mem = sum(mems) if all(m is not None for m in mems) else reading.mem_used_mib
    return replace(reading, util_pct=share_as_util(share, reading.util_pct, theirs.values()), mem_used_mib=mem,
                   gpu_util_pct=reading.util_pct, own_sm_pct=share, shared_with=len(theirs))


def share_as_util(share: float, gpu_util: float | None, theirs) -> float:
    """What a job's SM share of a shared GPU stands for, on the scale the engine judges util by. Jobs that
    compute side by side split the GPU's time: two matmul loops read ~48 % each of a GPU at 97 %, each as
    busy as it can be. So a share of a working job (at least ACTIVE_SHARE_PCT) counts once for each job
    working there, up to the GPU's util: 2 x 48 = 96 %; a job that runs (next to) nothing reads its share."""
    if share < ACTIVE_SHARE_PCT:
        return share
    working = 1 + sum(1 for s in theirs if s is not None and s >= ACTIVE_SHARE_PCT)
    return min(share * working, 100.0 if gpu_util is None else max(share, gpu_util))


def shared_line(g: GpuReading) -> str | None:
    """The head of a shared GPU's evidence line ("GPU0 shared with 3 other jobs: this job 0% SM of the
    GPU's 97%"); None for a GPU the job has alone."""
    if not g.shared_with:
        return None
    jobs = f"{g.shared_with} other job" + ("s" if g.shared_with != 1 else "")
    if g.own_sm_pct is None or g.gpu_util_pct is None:
        return f"GPU{g.index} shared with {jobs} (this job's share not read yet; the whole GPU's figures)"
    return (f"GPU{g.index} shared with {jobs}: this job {g.own_sm_pct:.0f}% SM of the GPU's "
            f"{g.gpu_util_pct:.0f}%")

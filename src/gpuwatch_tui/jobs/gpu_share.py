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
    sees it: unchanged where no other process holds the GPU; else its own SM share as its util (where the
    probe read it), the GPU's util in `gpu_util_pct` and the other jobs counted in `shared_with`."""
    own, others = [], []
    for p in gpu.processes:
        (own if p.pid in mine or p.pid in also else others).append(p)
    if not others or not own:
        return reading
    # the other jobs: a process of no known job counts as one
    seen: set = set()
    for p in others:
        owner = None if owners is None else owners.get(p.pid)
        seen.add(("pid", p.pid) if owner is None else owner)
    shares = [p.sm_pct for p in own]
    if any(s is None for s in shares):
        return replace(reading, shared_with=len(seen))  # not read (yet): the whole GPU's, said so
    mems = [p.mem_used_mib for p in own]
    mem = sum(mems) if all(m is not None for m in mems) else reading.mem_used_mib
    return replace(reading, util_pct=min(100.0, float(sum(shares))), mem_used_mib=mem,
                   gpu_util_pct=reading.util_pct, shared_with=len(seen))


def shared_line(g: GpuReading) -> str | None:
    """The head of a shared GPU's evidence line ("GPU0 shared with 3 other jobs: this job 0% SM of the
    GPU's 97%"); None for a GPU the job has alone."""
    if not g.shared_with:
        return None
    jobs = f"{g.shared_with} other job" + ("s" if g.shared_with != 1 else "")
    if g.gpu_util_pct is None or g.util_pct is None:
        return f"GPU{g.index} shared with {jobs} (this job's share not read yet; the whole GPU's figures)"
    return (f"GPU{g.index} shared with {jobs}: this job {g.util_pct:.0f}% SM of the GPU's "
            f"{g.gpu_util_pct:.0f}%")

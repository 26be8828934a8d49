"""When a host's frame would group its processes exactly as the last one did, grouping is skipped.

Grouping reads the process set (pids with start times, parent links, children, names: a launcher
agent is told by its comm), which pids are on a GPU, the probe's match lists and job candidates, which processes have an ML
runtime mapped (a parent that trains or one that drives runs), the facts log wiring and output dirs read (stdout/stderr, cwd, cmdline),
and the host's job records (alive or ended, members, dismissed, held back). When all of these equal
what they were right after the last grouping of the host, it would change nothing: skip it.

The frame parser (feeds/probe_frames.py) builds the process and GPU parts of the key itself as it reads a
frame, reusing each unchanged process's key of the last frame: `frame_key` then only gathers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import GpuSample, HostSample, ProcInfo

if TYPE_CHECKING:  # annotations only: the frame parser imports this module
    from .job_state import JobState


def _fd(target) -> tuple | None:
    return None if target is None else (target.path, target.kind)  # not its size: that grows with the log


def proc_key(p: ProcInfo) -> tuple:
    """Everything of one process that grouping reads."""
    # (the zombie flag at [3] and the children last: the frame parser reads them there)
    return (p.pid, p.start_time, p.ppid, p.state == "Z", p.name, p.cmdline, p.cwd, _fd(p.stdout), _fd(p.stderr),
            p.is_python, tuple((c.pid, c.start_ticks) for c in p.children))


def gpu_pids_key(gpu: GpuSample) -> tuple:
    """The processes on one GPU, as grouping reads them."""
    return tuple(gp.pid for gp in gpu.processes)


def frame_key(sample: HostSample) -> tuple:
    """Everything of a frame that grouping reads."""
    procs = sample.procs_key
    if procs is None:
        procs = tuple(proc_key(p) for p in sample.procs.values())
    gpus = sample.gpus_key
    if gpus is None:
        gpus = tuple(gpu_pids_key(g) for g in sample.gpus)
    matches = tuple(sorted((k, tuple(v)) for k, v in sample.matches.items())) if sample.matches else ()
    candidates = tuple(sorted(sample.candidates.items())) if sample.candidates else ()  # jobs before they use a GPU
    return procs, gpus, matches, candidates, sample.ml_loaded  # (which parents train: boundary.py)


def jobs_key(jobs: list[JobState], dismissed: int, holding: bool) -> tuple:
    """The host's job records as far as grouping reads them."""
    return (dismissed, holding, tuple((j.id, j.exit is None, tuple(j.members.items()), j.root, j.output_dir)
                                      for j in jobs))

"""What a job is, for the purpose of acting on it: every process the kill must reach.

The launcher/agent (torchrun `pt_elastic`, accelerate, deepspeed) comes first: killing a worker only makes
the agent respawn it. Then the job's other processes and all their live descendants (DataLoader and
compile workers), then leftover processes still holding the job's GPU memory. Each is a (pid, start_ticks)
pair: the probe refuses any whose start time no longer matches.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Iterable

from ..jobs.discovery import launcher_kind
from ..model import ChildProc, ProcInfo, ProcessRef

ROLE_ORDER = ("launcher", "main", "descendant", "gpu-holder", "leftover")


@dataclass(frozen=True)
class KillTarget:
    pid: int
    start_ticks: int
    role: str  # launcher, main (root or rank), descendant, gpu-holder
    name: str
    cmdline: tuple[str, ...] = ()

    def ref(self, host: str) -> ProcessRef:
        return ProcessRef(host, self.pid, self.start_ticks)

    def describe(self) -> str:
        cmd = shlex.join(self.cmdline) if self.cmdline else self.name
        if len(cmd) > 120:
            cmd = cmd[:117] + "..."
        return f"{self.pid} ({cmd})"


@dataclass(frozen=True)
class JobTree:
    """The job as the monitor last saw it: its processes (root first) and leftover GPU-memory holders."""

    host: str
    job: str
    procs: tuple[ProcInfo, ...]
    gpu_holders: tuple[ProcInfo | ChildProc, ...] = ()
    # Processes the job left behind when its top went (jobs/leftovers.py): what a reap ends.
    leftovers: tuple = ()

    def targets(self) -> list[KillTarget]:
        """Every process to signal, launchers first, each once; processes with no known start time are left
        out (they could not be told apart from a newcomer with the same pid) and listed in `skipped()`."""
        seen: set[int] = set()
        out: list[KillTarget] = []

        def add(pid: int, ticks: int, role: str, name: str, cmdline: Iterable[str]) -> None:
            if pid in seen or pid <= 1 or ticks <= 0:
                return
            seen.add(pid)
            out.append(KillTarget(pid, ticks, role, name, tuple(cmdline)))

        for p in self.procs:
            add(p.pid, p.start_ticks, "launcher" if launcher_kind(p) else "main", p.name, p.cmdline)
        for p in self.procs:
            for c in p.children:
                add(c.pid, c.start_ticks, "descendant", c.name, c.cmdline)
        for h in self.gpu_holders:
            add(h.pid, h.start_ticks, "gpu-holder", h.name, h.cmdline)
        for left in self.leftovers:
            add(left.pid, left.start_ticks, "leftover", left.name, left.cmdline)
        out.sort(key=lambda t: ROLE_ORDER.index(t.role))
        return out

    def skipped(self) -> list[int]:
        """Pids of the job that cannot be targeted because their start time is unknown."""
        pids = [p.pid for p in self.procs if p.start_ticks <= 0]
        pids += [c.pid for p in self.procs for c in p.children if c.start_ticks <= 0]
        pids += [h.pid for h in self.gpu_holders if h.start_ticks <= 0]
        pids += [left.pid for left in self.leftovers if left.start_ticks <= 0]
        return sorted(set(pids))

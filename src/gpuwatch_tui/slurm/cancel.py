"""Cancelling a Slurm job from gpuwatch: the plan a person confirms, checked against the job's state.

The pid-based kill (actions/kill.py) stays for jobs Slurm does not own; for a Slurm job `scancel` is
the one way that also frees the allocation and ends every node's processes (see scancel.py for
what --signal, --full and --batch do).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .records import SlurmJob
from .scancel import normalise_signal, scancel_argv


class CancelRefused(ValueError):
    pass


@dataclass(frozen=True)
class CancelPlan:
    job: SlurmJob
    argv: tuple[str, ...]
    where: str  # the login node, or "local"
    warnings: tuple[str, ...]

    @property
    def command(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)

    def text(self) -> str:
        j = self.job
        lines = [f"scancel: Slurm job {j.job_id} ({j.name}) of user {j.user or '?'}",
                 f"state: {j.state}" + (f" ({j.reason})" if j.reason else ""),
                 f"nodes: {j.nodelist or '-'}",
                 "command:", f"  {self.command}   # on {self.where}"]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"action": "scancel", "job": self.job.to_json(), "argv": list(self.argv), "command": self.command,
                "where": self.where, "warnings": list(self.warnings)}


def plan_cancel(job: SlurmJob, where: str, signal: str | int | None = None, full: bool = False,
                batch: bool = False) -> CancelPlan:
    """CancelRefused (with the reason) for what scancel would refuse, hang on, or do to nothing."""
    if job.is_ended:
        raise CancelRefused(f"Slurm job {job.job_id} has ended ({job.state}): nothing to cancel")
    try:
        sig = normalise_signal(signal)
        argv = scancel_argv(job.job_id, sig, full, batch)
    except ValueError as exc:
        raise CancelRefused(str(exc)) from None
    warnings: list[str] = []
    if sig is not None and job.is_pending:
        # scancel --signal on a pending job waits for it to start (it has no process to signal).
        raise CancelRefused(f"Slurm job {job.job_id} is pending: it has no process to signal "
                            "(leave the signal out to cancel it)")
    if sig is None and (full or batch):
        warnings.append("without --signal the whole job is cancelled; --full/--batch only steer a signal")
    if sig is not None and not (full or batch):
        warnings.append("--signal without --full reaches srun steps only, not a script that runs the training "
                        "itself: add --full for that")
    if sig is None:
        warnings.append("the job ends CANCELLED on every node and its allocation is freed")
    return CancelPlan(job, tuple(argv), where, tuple(warnings))

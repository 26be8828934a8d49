"""The Slurm queue as rows for a person: the same cells in `status` and in the dashboard's table.

What an on-call person reads first: is it running, where, for how long out of how long; if it waits,
why; if it ended, how (state, exit code or signal); and where its log is.
"""

from __future__ import annotations

from dataclasses import dataclass

from .durations import format_slurm_duration
from .records import SlurmJob

COLUMNS = ("JOBID", "NAME", "STATE", "NODES / REASON", "ELAPSED/LIMIT", "EXIT", "LOG")
# The theme variable that colours each state (the phase colours, so the meaning matches the jobs table).
_STATE_VARIABLE = {
    "RUNNING": "phase-training", "COMPLETING": "phase-checkpointing", "PENDING": "phase-starting",
    "COMPLETED": "phase-finished", "FAILED": "phase-crashed", "TIMEOUT": "phase-crashed",
    "OUT_OF_MEMORY": "phase-crashed", "NODE_FAIL": "phase-crashed", "BOOT_FAIL": "phase-crashed",
    "CANCELLED": "phase-stalled", "PREEMPTED": "phase-stalled", "SUSPENDED": "phase-silent",
}


@dataclass(frozen=True)
class QueueRow:
    key: str  # the Slurm job id
    cells: tuple[str, ...]  # in COLUMNS order
    state_variable: str  # theme variable for the state cell


def exit_text(job: SlurmJob) -> str:
    if not job.is_ended:
        return "-"
    if job.exit_signal:
        return f"sig {job.exit_signal}" if not job.exit_code else f"{job.exit_code} sig {job.exit_signal}"
    return "-" if job.exit_code is None else str(job.exit_code)


def where_text(job: SlurmJob) -> str:
    if job.is_pending:
        return f"({job.reason or 'pending'})"
    count = len(job.nodes)
    nodes = job.nodelist or "-"
    return f"{nodes} ({count} nodes)" if count > 1 else nodes


NEAR_LIMIT = 0.9  # a running job past this share of its time limit is flagged: Slurm will end it soon


def time_text(job: SlurmJob) -> str:
    elapsed = "-" if job.elapsed_s is None else format_slurm_duration(job.elapsed_s)
    text = f"{elapsed}/{format_slurm_duration(job.time_limit_s)}"
    if job.is_active and job.elapsed_s is not None and job.time_limit_s:
        left = job.time_limit_s - job.elapsed_s
        if job.elapsed_s >= NEAR_LIMIT * job.time_limit_s:
            text += f" ({format_slurm_duration(max(0, left))} left)"
    return text


def queue_row(job: SlurmJob) -> QueueRow:
    cells = (job.job_id, job.name, job.state, where_text(job), time_text(job), exit_text(job), job.stdout or "-")
    return QueueRow(job.job_id, cells, _STATE_VARIABLE.get(job.base_state, "phase-unknown"))


def queue_rows(jobs: list[SlurmJob]) -> list[QueueRow]:
    return [queue_row(j) for j in jobs]

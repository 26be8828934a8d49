"""`scancel` for a Slurm job: the argv, checked.

  no --signal     Slurm's cancel: the whole job ends CANCELLED (SIGCONT+SIGTERM to the steps, SIGKILL
                   after KillWait) and its nodes are freed, whatever --full/--batch say.
  --signal=SIG     only sends SIG; the job runs on unless SIG ends it (e.g. USR1 to ask for a checkpoint).
                   By default it reaches the job's srun steps only, not the batch shell:
  --batch          ... the batch step only: the shell running the script (not srun steps it started);
  --full           ... every step and the batch shell with all of its children: the right choice when
                   the training runs straight from the batch script (python/torchrun without srun).
--batch and --full exclude each other and apply to batch jobs only.
"""

from __future__ import annotations

import re

SIGNALS = ("TERM", "INT", "KILL", "HUP", "USR1", "USR2", "QUIT", "CONT", "STOP", "TSTP", "ABRT", "ALRM")
# 123, 123_4, 123_[4-9,12] (the pending rest of an array), optionally a step: .0 / .batch
_JOB_ID = re.compile(r"^\d+(_\d+|_\[\d+(-\d+)?(,\d+(-\d+)?)*\])?(\.\d+|\.batch)?$")


def normalise_signal(signal: str | int | None) -> str | None:
    if signal is None or signal == "":
        return None
    if isinstance(signal, int) or str(signal).isdigit():
        n = int(signal)
        if not 1 <= n <= 64:
            raise ValueError(f"signal number out of range: {signal}")
        return str(n)
    name = str(signal).upper()
    name = name[3:] if name.startswith("SIG") else name
    if name not in SIGNALS:
        raise ValueError(f"unknown signal {signal!r} (one of {', '.join(SIGNALS)}, or a number)")
    return name


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
        raise ValueError(f"not a Slurm job id: {job_id!r} (expected 123, 123_4, 123_[4-9] or 123.0)")
    return job_id


def scancel_id(job_id: str) -> str:
    """The id scancel takes for a job as squeue lists it: a pending array's `123_[4-9%2]` loses its
    throttle (`%2`), which scancel does not accept."""
    if "_[" in job_id and "%" in job_id:
        head, _, rest = job_id.partition("%")
        return head + "]" + rest[rest.index("]") + 1:]
    return job_id


def scancel_argv(job_id: str, signal: str | int | None = None, full: bool = False, batch: bool = False) -> list[str]:
    job_id = scancel_id(job_id)
    check_job_id(job_id)
    if full and batch:
        raise ValueError("scancel takes --full or --batch, not both")
    argv = ["scancel"]
    sig = normalise_signal(signal)
    if sig is not None:
        argv.append(f"--signal={sig}")
    if full:
        argv.append("--full")
    if batch:
        argv.append("--batch")
    argv += ["--", job_id]
    return argv

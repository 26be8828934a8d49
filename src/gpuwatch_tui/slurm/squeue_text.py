"""`squeue --Format` text: the argv to ask for it, and the parser.

Job names and paths may hold spaces and `|`, so every field is printed unpadded (width 0) and ended
by the ASCII unit separator (0x1f), which no job name or path has in practice. A line whose field
count is off (a name with a newline or 0x1f in it) is reported, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .durations import parse_slurm_duration
from .hostlist import HostlistError, expand_hostlist
from .log_path import expand_log_path
from .records import SlurmJob

SEP = "\x1f"
# Field names as squeue's --Format knows them (the same from 20.11 through 24.x).
FIELDS = ("JobID", "JobArrayID", "ArrayJobID", "ArrayTaskID", "Name", "UserName", "State", "Reason",
          "NodeList", "TimeUsed", "TimeLimit", "Partition", "WorkDir", "SubmitTime", "StartTime",
          "STDOUT", "STDERR")


def squeue_argv(user: str | None = None, job_ids: list[str] | None = None, expand_arrays: bool = False) -> list[str]:
    """Running array tasks come one line each; the pending rest of an array is one `123_[4-9%2]` line
    (what a person wants to read) unless `expand_arrays` (`--array`: a line per task)."""
    argv = ["squeue", "--noheader", "--Format=" + ",".join(f"{f}:0{SEP}" for f in FIELDS)]
    if expand_arrays:
        argv.insert(2, "--array")
    if user:
        argv.append(f"--user={user}")
    if job_ids:
        argv.append("--jobs=" + ",".join(job_ids))
    return argv


@dataclass
class ParseResult:
    jobs: list[SlurmJob]
    problems: list[str]  # lines that could not be read, with why


def _none(value: str) -> str | None:
    v = value.strip()
    return None if v in ("", "N/A", "(null)", "None") else v


def parse_squeue_text(text: str, node_host: Callable[[str], str] | None = None) -> ParseResult:
    """`node_host`: a node's host name for `%N` (slurmstepd writes the host name, which is the node
    name on most clusters but not where NodeHostname differs); default: the node name."""
    jobs: list[SlurmJob] = []
    problems: list[str] = []
    n = len(FIELDS)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if parts and parts[-1].strip() == "":
            parts = parts[:-1]
        if len(parts) != n:
            problems.append(f"squeue line {number}: {len(parts)} fields, expected {n}: {line[:200]!r}")
            continue
        f = dict(zip(FIELDS, parts))
        try:
            jobs.append(_job(f, node_host or _same))
        except ValueError as exc:
            problems.append(f"squeue line {number}: {exc}")
    return ParseResult(jobs, problems)


def _same(name: str) -> str:
    return name


def _job(f: dict[str, str], node_host: Callable[[str], str]) -> SlurmJob:
    raw_id = f["JobID"].strip()
    if not raw_id:
        raise ValueError("empty job id")
    array_task = _none(f["ArrayTaskID"])
    array_job = _none(f["ArrayJobID"]) if array_task else None
    display_id = f["JobArrayID"].strip() or raw_id
    # The pending rest of an array ("2-6%2"): no single task id to put in a path.
    task_for_paths = array_task if array_task is None or array_task.isdigit() else None
    try:
        nodes = tuple(expand_hostlist(f["NodeList"]))
    except HostlistError as exc:
        raise ValueError(str(exc)) from None
    user = f["UserName"].strip()
    name = f["Name"]
    work_dir = _none(f["WorkDir"])

    def path(value: str) -> str | None:
        text = _none(value)
        if array_task is not None and work_dir and text == f"{work_dir.rstrip('/')}/slurm-{raw_id}.out":
            # squeue prints the default path as slurm-<id>.out, but for an array task sbatch's default
            # is slurm-%A_%a.out: that is the file the task writes.
            text = "slurm-%A_%a.out"
        return expand_log_path(text, job_id=raw_id, array_job_id=array_job, array_task_id=task_for_paths,
                               node=node_host(nodes[0]) if nodes else None, user=user, name=name,
                               work_dir=work_dir, task_unknown=array_task is not None and task_for_paths is None)

    state = f["State"].strip()
    reason = _none(f["Reason"])
    return SlurmJob(
        job_id=display_id, name=name, user=user, state=state, reason=reason, nodes=nodes,
        nodelist=f["NodeList"].strip(), elapsed_s=parse_slurm_duration(f["TimeUsed"]),
        time_limit_s=parse_slurm_duration(f["TimeLimit"]), stdout=path(f["STDOUT"]), stderr=path(f["STDERR"]),
        array_job_id=array_job, array_task_id=array_task, raw_id=raw_id, partition=_none(f["Partition"]),
        work_dir=work_dir, submit_time=_none(f["SubmitTime"]), start_time=_none(f["StartTime"]),
        source="squeue",
    )

"""`scontrol show job -o ID`: one line of Key=Value pairs per job (several for an array).

Values may hold spaces (JobName, paths), so a pair ends where the next ` Key=` begins. StdOut/StdErr
come back filled in more or less completely depending on the version: log_path finishes the job.
"""

from __future__ import annotations

import re
from typing import Callable

from .durations import parse_slurm_duration
from .hostlist import HostlistError, expand_hostlist
from .log_path import expand_log_path
from .records import SlurmJob

# The keys scontrol prints, each starting a pair: a capitalised word (with : / _ inside, e.g.
# AllocNode:Sid, CPUs/Task, ReqB:S:C:T) right after a space.
_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_:/]*)=")


def scontrol_argv(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "-o", "--", job_id]


def parse_pairs(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    matches = list(_KEY.finditer(line))
    for m, nxt in zip(matches, matches[1:] + [None]):
        end = nxt.start() if nxt is not None else len(line)
        out.setdefault(m.group(1), line[m.end():end].strip())
    return out


def _none(value: str | None) -> str | None:
    v = (value or "").strip()
    return None if v in ("", "N/A", "(null)", "None", "Unknown") else v


def split_exit_code(value: str | None) -> tuple[int | None, int | None]:
    """'3:0' -> (3, None); '0:15' -> (0, 15): the exit status, and the signal when one ended it."""
    v = _none(value)
    if v is None:
        return None, None
    code, _, sig = v.partition(":")
    try:
        signal = int(sig) if sig else 0
        return int(code), (signal or None)
    except ValueError:
        return None, None


def parse_scontrol_jobs(text: str, node_host: Callable[[str], str] | None = None) -> list[SlurmJob]:
    """`node_host`: a node's host name for `%N` (see squeue_text.parse_squeue_text)."""
    jobs = []
    for line in text.splitlines():
        if line.startswith("JobId="):
            jobs.append(job_from_pairs(parse_pairs(line), node_host))
    return jobs


def job_from_pairs(p: dict[str, str], node_host: Callable[[str], str] | None = None) -> SlurmJob:
    raw_id = p["JobId"]
    array_job = _none(p.get("ArrayJobId"))
    array_task = _none(p.get("ArrayTaskId"))
    display_id = f"{array_job}_{array_task}" if array_job and array_task else raw_id
    try:
        nodes = tuple(expand_hostlist(p.get("NodeList", "")))
    except HostlistError:
        nodes = ()
    user = (p.get("UserId") or "").split("(")[0]
    name = p.get("JobName", "")
    work_dir = _none(p.get("WorkDir"))
    state = p.get("JobState", "")
    exit_code, exit_signal = split_exit_code(p.get("ExitCode"))
    batch_host = _none(p.get("BatchHost"))
    first_node = batch_host or (nodes[0] if nodes else None)

    def path(value: str | None) -> str | None:
        return expand_log_path(_none(value), job_id=raw_id, array_job_id=array_job, array_task_id=array_task,
                               node=(node_host or str)(first_node) if first_node else None, user=user,
                               name=name, work_dir=work_dir)

    try:
        elapsed = parse_slurm_duration(p.get("RunTime"))
    except ValueError:
        elapsed = None
    try:
        limit = parse_slurm_duration(p.get("TimeLimit"))
    except ValueError:
        limit = None
    return SlurmJob(
        job_id=display_id, name=name, user=user, state=state, reason=_none(p.get("Reason")), nodes=nodes,
        nodelist=(p.get("NodeList") or "").strip(), elapsed_s=elapsed, time_limit_s=limit,
        stdout=path(p.get("StdOut")), stderr=path(p.get("StdErr")),
        exit_code=exit_code, exit_signal=exit_signal, array_job_id=array_job, array_task_id=array_task,
        raw_id=raw_id, partition=_none(p.get("Partition")), work_dir=work_dir,
        submit_time=_none(p.get("SubmitTime")), start_time=_none(p.get("StartTime")),
        end_time=_none(p.get("EndTime")), source="scontrol",
    )


def parse_node_hosts(text: str) -> dict[str, str]:
    """`scontrol show node -o`: NodeName -> NodeHostName (what slurmstepd puts for %N)."""
    out = {}
    for line in text.splitlines():
        p = parse_pairs(line)
        if p.get("NodeName"):
            out[p["NodeName"]] = p.get("NodeHostName") or p["NodeName"]
    return out

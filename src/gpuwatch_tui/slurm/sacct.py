"""`sacct -P`: final state and exit code of jobs that left the queue.

Parsable output with our own delimiter (a job name may hold `|`), allocations only (`-X`: the
`.batch` / `.extern` steps would add lines per job). Without accounting (no slurmdbd), sacct exits
non-zero with "accounting storage is disabled": the caller then asks scontrol, which still
remembers a job for MinJobAge seconds after it ended.
"""

from __future__ import annotations

from .durations import parse_slurm_duration
from .hostlist import HostlistError, expand_hostlist
from .records import SlurmJob
from .scontrol_job import split_exit_code

SEP = "\x1f"
FIELDS = ("JobID", "JobIDRaw", "JobName", "User", "State", "ExitCode", "NodeList", "Elapsed", "Timelimit",
          "Partition", "WorkDir", "Submit", "Start", "End")


def sacct_argv(job_ids: list[str]) -> list[str]:
    return ["sacct", "--noheader", "--parsable2", f"--delimiter={SEP}", "--allocations",
            "--format=" + ",".join(FIELDS), "--jobs=" + ",".join(job_ids)]


def accounting_disabled(stderr: str) -> bool:
    text = stderr.lower()
    return ("accounting storage is disabled" in text or "slurmdbd" in text
            or "accounting_storage/none" in text)


def _none(value: str) -> str | None:
    v = value.strip()
    return None if v in ("", "N/A", "(null)", "None", "Unknown") else v


def parse_sacct(text: str) -> tuple[list[SlurmJob], list[str]]:
    jobs, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) != len(FIELDS):
            problems.append(f"sacct line {number}: {len(parts)} fields, expected {len(FIELDS)}: {line[:200]!r}")
            continue
        f = dict(zip(FIELDS, parts))
        job_id = f["JobID"].strip()
        array_job = array_task = None
        if "_" in job_id:
            array_job, _, array_task = job_id.partition("_")
        try:
            nodes = tuple(expand_hostlist(f["NodeList"]))
        except HostlistError:
            nodes = ()
        code, sig = split_exit_code(f["ExitCode"])
        try:
            elapsed = parse_slurm_duration(f["Elapsed"])
            limit = parse_slurm_duration(f["Timelimit"])
        except ValueError as exc:
            problems.append(f"sacct line {number}: {exc}")
            continue
        jobs.append(SlurmJob(
            job_id=job_id, name=f["JobName"], user=f["User"].strip(), state=f["State"].strip(), nodes=nodes,
            nodelist=f["NodeList"].strip() if nodes else "", elapsed_s=elapsed, time_limit_s=limit, exit_code=code,
            exit_signal=sig, array_job_id=array_job, array_task_id=array_task, raw_id=_none(f["JobIDRaw"]),
            partition=_none(f["Partition"]), work_dir=_none(f["WorkDir"]), submit_time=_none(f["Submit"]),
            start_time=_none(f["Start"]), end_time=_none(f["End"]), source="sacct",
        ))
    return jobs, problems

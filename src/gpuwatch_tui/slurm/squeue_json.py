"""`squeue --json`, read for the schemas the data_parser plugins have printed:

  v0.0.38 (22.05)        job_state "RUNNING", time_limit 10 (minutes), start_time 1700000000,
                         array_task_id 4 or null, nodes "gpu[01-02]"
  v0.0.39 / v0.0.40 (23.02 / 23.11)  job_state ["RUNNING"], numbers as {"set", "infinite", "number"},
                         exit_code {"status": [...], "return_code": {...}, "signal": {...}}
  v0.0.41 (24.05)        as v0.0.40, plus stdout_expanded / stderr_expanded (Slurm fills the patterns)

Text (squeue_text.py) is the default; JSON is only asked for when the version's plugin can print it.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from .hostlist import HostlistError, expand_hostlist
from .log_path import expand_log_path
from .records import SlurmJob

NO_VAL = (4294967294, 4294967295, 65534, 65535)
# squeue --json needs the data_parser plugin of 23.02+ to print the schema this module reads
# with numbers as {"set", "infinite", "number"}; 21.08-22.05 print the older openapi v0.0.37/38
# form, also read here.
JSON_SINCE = (21, 8)


def squeue_json_argv(user: str | None = None) -> list[str]:
    argv = ["squeue", "--json"]
    if user:
        argv.append(f"--user={user}")
    return argv


def supports_json(version: tuple[int, int] | None) -> bool:
    return version is not None and version >= JSON_SINCE


def parse_version(text: str) -> tuple[int, int] | None:
    """`slurm 22.05.8` / `slurm-wlm 22.05.8` -> (22, 5)."""
    for word in text.split():
        parts = word.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return int(parts[0]), int(parts[1])
    return None


def _number(value: Any) -> int | None:
    """A plain number (v0.0.38) or {"set": true, "infinite": false, "number": N} (v0.0.39+)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if int(value) in NO_VAL:
        return None
    return int(value)


def _state(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return str(value or "")


def _text(value: Any) -> str | None:
    if value in (None, "", "(null)", "N/A"):
        return None
    return str(value)


def parse_squeue_json(text: str, now: float | None = None,
                      node_host: Callable[[str], str] | None = None) -> list[SlurmJob]:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise ValueError("squeue --json: no `jobs` list in the output")
    errors = [e for e in data.get("errors") or [] if e]
    if errors and not data["jobs"]:
        first = errors[0]
        words = (first.get("description") or first.get("error")) if isinstance(first, dict) else None
        raise ValueError("squeue --json: " + str(words or first))
    now = time.time() if now is None else now
    return [_job(j, now, node_host or str) for j in data["jobs"]]


def _exit(value: Any) -> tuple[int | None, int | None]:
    if isinstance(value, dict):
        code = _number(value.get("return_code"))
        sig = value.get("signal")
        signal = _number(sig.get("id")) if isinstance(sig, dict) and "id" in sig else _number(sig)
        return code, (signal or None)
    # v0.0.37/38 (21.08, 22.05): the raw wait status, e.g. 768 for exit 3, 15 for SIGTERM.
    raw = _number(value)
    if raw is None:
        return None, None
    return raw >> 8 & 0xFF, (raw & 0x7F) or None


def _job(j: dict, now: float, node_host: Callable[[str], str]) -> SlurmJob:
    raw_id = str(_number(j.get("job_id")))
    array_task = _number(j.get("array_task_id"))
    array_job = _number(j.get("array_job_id")) if array_task is not None else None
    display_id = f"{array_job}_{array_task}" if array_job else raw_id
    nodelist = _text(j.get("nodes")) or ""
    try:
        nodes = tuple(expand_hostlist(nodelist))
    except HostlistError:
        nodes = ()
    state = _state(j.get("job_state"))
    start = _number(j.get("start_time"))
    elapsed = None
    if state in ("RUNNING", "COMPLETING") and start:
        elapsed = max(0, int(now - start))
    elif state == "PENDING":
        elapsed = 0
    user = _text(j.get("user_name")) or ""
    name = j.get("name") or ""
    work_dir = _text(j.get("current_working_directory"))

    # An empty path on a batch job is Slurm's default: slurm-%j.out (slurm-%A_%a.out for an array
    # task) in the work dir, for stdout and stderr alike (22.05 leaves it empty; the text form shows it).
    batch = j.get("batch_flag", True) is not False
    default = ("slurm-%A_%a.out" if array_task is not None else "slurm-%j.out") if batch else None

    def path(expanded_key: str, key: str) -> str | None:
        value = (_text(j.get(expanded_key)) or _text(j.get(key))
                 or _text(j.get("stdout_expanded")) or _text(j.get("standard_output")) or default)
        return expand_log_path(value, job_id=raw_id, array_job_id=str(array_job) if array_job else None,
                               array_task_id=str(array_task) if array_task is not None else None,
                               node=node_host(nodes[0]) if nodes else None, user=user, name=name,
                               work_dir=work_dir)

    limit = _number(j.get("time_limit"))
    code, sig = _exit(j.get("exit_code"))
    reason = _text(j.get("state_reason"))
    ended = state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")
    return SlurmJob(
        job_id=display_id, name=name, user=user, state=state, reason=None if reason == "None" else reason,
        nodes=nodes, nodelist=nodelist, elapsed_s=elapsed,
        time_limit_s=limit * 60 if limit is not None else None,
        stdout=path("stdout_expanded", "standard_output"), stderr=path("stderr_expanded", "standard_error"),
        exit_code=code if ended else None, exit_signal=sig if ended else None,
        array_job_id=str(array_job) if array_job else None,
        array_task_id=str(array_task) if array_task is not None else None, raw_id=raw_id,
        partition=_text(j.get("partition")), work_dir=work_dir, source="squeue-json",
    )

"""Fill in the %-patterns of a job's stdout/stderr path the way slurmstepd does.

Which patterns come back already filled depends on the command and the version: squeue's STDOUT
field is the raw pattern, `scontrol show job` fills %j %A %a %x %u but (22.05) not %N, newer
versions fill more. Expanding what is left is therefore always done here; an already-expanded
path has no '%' left and passes unchanged.
"""

from __future__ import annotations

import re

_PATTERN = re.compile(r"%(\d*)([%AajNnstuxb])")


def expand_log_path(path: str | None, *, job_id: str, array_job_id: str | None = None,
                    array_task_id: str | None = None, node: str | None = None, user: str | None = None,
                    name: str | None = None, work_dir: str | None = None, task_unknown: bool = False) -> str | None:
    """`%j` job id (an array task's own numeric id), `%A` array master id, `%a` array task id, `%N` first
    node, `%u` user, `%x` job name, `%%` a percent; `%5j` pads with zeros like Slurm. A relative path is
    taken from the job's work dir. Patterns whose value is unknown here are left as they are
    (`task_unknown`: the pending rest of an array, whose %a is not one task yet)."""
    if path is None or path in ("", "(null)", "N/A"):
        return None
    in_array = array_task_id not in (None, "", "N/A", "4294967294")
    values = {
        "j": job_id,
        "A": array_job_id if (in_array or task_unknown) and array_job_id else job_id,
        "a": None if task_unknown else array_task_id if in_array else "4294967294",  # slurmstepd's "no task"
        "N": node,
        "n": "0" if node else None,  # node number within the job: the batch step runs on node 0
        "u": user,
        "x": name,
        "s": "batch",
        "t": "0",
        "b": None if task_unknown else array_task_id[-1:] if in_array else "0",
    }

    def fill(m: re.Match) -> str:
        width, key = m.group(1), m.group(2)
        if key == "%":
            return "%"
        value = values.get(key)
        if value is None:
            return m.group(0)
        if width and value.isdigit():
            return value.zfill(int(width))
        return value

    out = _PATTERN.sub(fill, path)
    if work_dir and not out.startswith("/"):
        out = work_dir.rstrip("/") + "/" + out
    return out

"""Which action of gpuwatch's own a job's end follows: a job gpuwatch killed ends `crashed/killed`
"killed by USER via gpuwatch", never `finished` nor a guess at the cause.

The records come from this gpuwatch's own actions (the tracker's `record_action`) and from the host, where
every action leaves one that every gpuwatch watching reads (host_actions.py); the judging reads them here
(job_actions.ActionRecord: `action`, `user`, `when`, `run`).
"""

from __future__ import annotations

import time

from .phase import KILL, RESTART

KILLING_ACTIONS = (KILL, RESTART)  # a restart kills the run it replaces first
# The record is written as the signals go out; the end is dated by the host's clock moved onto ours.
KILL_SLACK_S = 2.0


def ended_by(records, run: int, ended_at: float) -> str | None:
    """"killed by alice via gpuwatch at 12:03:04" for the kill of this run that its end follows, else None."""
    for r in reversed(list(records)):
        if r.action in KILLING_ACTIONS and r.run == run and r.when <= ended_at + KILL_SLACK_S:
            how = "" if r.action == "kill" else f" ({r.action})"
            return f"killed by {r.user} via gpuwatch{how} at {time.strftime('%H:%M:%S', time.localtime(r.when))}"
    return None

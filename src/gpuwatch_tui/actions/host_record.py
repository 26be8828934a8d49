"""The record an action leaves on its host (the probe's `note_action` op, probe/action_notes.py), so that every
gpuwatch watching the host reads the outcome: a kill reads `crashed (killed by USER via gpuwatch)` there too."""

from __future__ import annotations

import os

from .request import Request, failure_of

NOTE_TIMEOUT_S = 10.0
FINDING_CHARS = 600  # the host's record keeps an evidence line of at most this many characters


def new_ref() -> str:
    """The id of one action's record: the host's record and this gpuwatch's own are known as one by it."""
    return os.urandom(8).hex()


async def note_action(request: Request, action: str, user: str, targets, ref: str,
                      finding: dict | None = None) -> str | None:
    """Write the record before the action goes out; a warning line where it could not be written (the action
    still goes ahead: only other gpuwatch instances then miss who did it). `finding`: a dump's reading
    ({evidence, phase, detail}), so that every gpuwatch's verdict carries it."""
    args = {"action": action, "user": user, "id": ref,
            "targets": [{"pid": t.pid, "start_ticks": t.start_ticks} for t in targets]}
    if finding is not None:
        args["finding"] = {**finding, "evidence": finding["evidence"][:FINDING_CHARS]}
    try:
        await request("note_action", args, NOTE_TIMEOUT_S)
    except Exception as exc:
        failure = failure_of(exc)
        if failure is None:
            raise
        return f"the action's record on the host was not written ({failure.message}): other gpuwatch instances " \
               "will not know who ended the job"
    return None

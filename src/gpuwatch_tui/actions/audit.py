"""The audit log: one JSON line per action attempt, done or refused, in gpuwatch's local state dir.

Time, local user, host, job, pids, action, the exact command and the result. A full disk or an
unwritable directory is an AuditError with words for a person; callers refuse the action then, since
an action that cannot be recorded should not be taken.
"""

from __future__ import annotations

import errno
import getpass
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from ..errors import GpuwatchError


class AuditError(GpuwatchError):
    """The audit log could not be written."""


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gpuwatch"


def default_audit_path() -> Path:
    return default_state_dir() / "audit.jsonl"


class AuditLog:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_audit_path()

    def record(self, *, host: str, job: str, action: str, pids: Iterable[int], command: str,
               result: str, detail: dict[str, Any] | None = None, local_user: str | None = None,
               when: float | None = None, job_id: str | None = None) -> dict[str, Any]:
        """Append one entry (result: done, refused, failed, cancelled...); returns what was written.
        `job_id`: the job's short id (names repeat: it says which `train.py` was acted on)."""
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when)),
            "local_user": local_user or current_user(),
            "host": host,
            "job": job,
            "pids": [int(p) for p in pids],
            "action": action,
            "command": command,
            "result": result,
        }
        if job_id:
            entry["job_id"] = job_id
        if detail is not None:
            entry["detail"] = detail
        line = (json.dumps(entry, default=str, sort_keys=False) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                # One write per line: O_APPEND keeps lines from two gpuwatch processes whole.
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError(errno.ENOSPC, "short write")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            why = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                   errno.EACCES: "permission denied", errno.EROFS: "the file system is read-only"}.get(
                exc.errno, exc.strerror or str(exc))
            raise AuditError(f"cannot write the audit log {self.path}: {why}") from None
        return entry

    def entries(self) -> list[dict[str, Any]]:
        """Every entry so far (for tests and `gpuwatch doctor`); a torn last line is skipped."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry and no LOGNAME: still name someone
        return f"uid {os.getuid()}"

"""The audit log: one JSON line per attempt; a full disk or unwritable dir is a clear error."""

from __future__ import annotations

import os

import pytest

from gpuwatch_tui.actions.audit import AuditError, AuditLog


def test_entries_are_appended_as_json_lines(tmp_path):
    log = AuditLog(tmp_path / "state" / "audit.jsonl")
    log.record(host="gpu-1", job="train.py", action="kill", pids=[12, 13], command="SIGTERM 12 13",
               result="done", detail={"exited": 2}, local_user="alice", when=0)
    log.record(host="gpu-1", job="train.py", action="restart", pids=[12], command="cd /x && python3 -u t.py",
               result="refused", local_user="alice")
    entries = log.entries()
    assert [e["result"] for e in entries] == ["done", "refused"]
    assert entries[0] == {"time": "1970-01-01T00:00:00Z", "local_user": "alice", "host": "gpu-1", "job": "train.py",
                          "pids": [12, 13], "action": "kill", "command": "SIGTERM 12 13", "result": "done",
                          "detail": {"exited": 2}}
    assert oct(os.stat(log.path).st_mode & 0o777) == "0o600"


def test_full_disk_is_a_clear_error():
    with pytest.raises(AuditError, match="disk is full"):
        AuditLog("/dev/full").record(host="h", job="j", action="kill", pids=[], command="c", result="done")


def test_unwritable_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AuditError, match=f"cannot write the audit log {blocker}/audit.jsonl"):
        AuditLog(blocker / "audit.jsonl").record(host="h", job="j", action="kill", pids=[], command="c", result="x")

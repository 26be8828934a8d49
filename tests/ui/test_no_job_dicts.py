"""The UI reads jobs as typed JobViews: no module in ui/ indexes job data as a dict.

Two rules over the AST of every ui/ module, for `x["key"]` and `x.get("key")`:
- the receiver is named like job data (`job`, `j`, `jobs`, `entry`, `progress`, `*_job`...), any key;
- the key is one only job data has (`evidence`, `exit_code`, `step`...), any receiver. The jobs
  table's column names (`phase`, `since`, `rate`...) are left out of this rule: its layout dicts
  are keyed by them.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from gpuwatch_tui.views import JobView, PhaseEntry, ProgressView

UI = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui" / "ui"
JOBISH_RECEIVER = re.compile(r"^(j|job|jobs|\w+_job|job_\w+|entry|entries|history|progress|\w+_progress)$")
COLUMN_NAMES = {"host", "job", "gpus", "phase", "since", "progress", "rate", "loss", "eta", "name", "id"}
JOB_ONLY_KEYS = {
    f.name for cls in (JobView, ProgressView, PhaseEntry) for f in dataclasses.fields(cls)
} - COLUMN_NAMES
# The recording reader indexes the recording file's own dicts (a log's "total"); its jobs go
# through JobView.from_json, and the receiver rule still applies to it.
KEY_RULE_EXEMPT = {"recorded_source.py"}


def _receiver_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):  # source.jobs()[0]["id"], job.get("progress").get("rate")
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get":
            return _receiver_name(func.value)
        return _receiver_name(func)
    if isinstance(node, ast.Subscript):  # jobs[0]["id"]
        return _receiver_name(node.value)
    if isinstance(node, ast.BoolOp):  # (job.get("progress") or {}).get("rate")
        return _receiver_name(node.values[0])
    return None


def dict_accesses(source: str, key_rule: bool = True) -> list[tuple[int, str]]:
    """(line, text) of every job-data dict access in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            receiver, key = node.value, node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            receiver, key = node.func.value, node.args[0].value
        else:
            continue
        if not isinstance(key, str):
            continue
        name = _receiver_name(receiver) or ""
        if JOBISH_RECEIVER.match(name) or (key_rule and key in JOB_ONLY_KEYS):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_rules_catch_the_old_dict_access_and_spare_other_dicts():
    old = '''
job = next((j for j in source.jobs() if j["id"] == job_id), None)
phase = job.get("phase") or "unknown"
title = f"{job['name']} on {job['host']}"
end = entries[n + 1]["since"]
step = p.get("step")
rate = -((j.get("progress") or {}).get("rate") or 0.0)
first = source.jobs()[0]["id"]
'''
    assert [line for line, _ in dict_accesses(old)] == [2, 3, 4, 4, 5, 6, 7, 7, 8]
    fine = '''
name = data.get("name")
colors = data.get("colors", {})
widths["phase"] = phase
cells["progress:short"]
host = store.hosts["trainer-a"]
'''
    assert dict_accesses(fine) == []


def test_no_ui_module_indexes_job_data_as_a_dict():
    modules = sorted(UI.rglob("*.py"))
    assert len(modules) > 20  # the walk found the package
    offenders = []
    for path in modules:
        text = path.read_text(encoding="utf-8")
        for line, code in dict_accesses(text, key_rule=path.name not in KEY_RULE_EXEMPT):
            offenders.append(f"{path.relative_to(UI)}:{line}: {code}")
    assert offenders == []

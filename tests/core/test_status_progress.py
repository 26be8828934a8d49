"""The `status` table's PROGRESS column: step/total where the log gives both, the step alone where it gives no
total (a plain `step 44 loss ...` loop), `-` where it gives neither."""

from __future__ import annotations

from gpuwatch_tui.status_table import render_status


def progress_cell(progress: dict | None) -> str:
    job = {"host": "h", "name": "train.py", "pids": [1], "phase": "training", "since": 0.0, "evidence": [],
           "progress": progress}
    text = render_status({"time": 10.0, "hosts": [], "gpus": [], "jobs": [job]})
    header, row = text.splitlines()[-2:]
    return row[header.index("PROGRESS"):].split()[0] if len(row) > header.index("PROGRESS") else ""


def test_step_and_total():
    assert progress_cell({"step": 2600, "total": 7517}) == "2600/7517"


def test_a_step_without_a_total_is_not_shown_against_none():
    assert progress_cell({"step": 44, "total": None}) == "44"


def test_no_progress():
    assert progress_cell(None) == "-"

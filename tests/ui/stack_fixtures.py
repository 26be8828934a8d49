"""A DumpReport built from the real py-spy dumps of a 2-rank NCCL hang on an H200 (tests/data/pyspy)."""

from __future__ import annotations

from pathlib import Path

from gpuwatch_tui.actions.dump import DumpReport
from gpuwatch_tui.actions.stack_analysis import analyse
from tests.actions.pyspy_helpers import h200_dump

TAKEN_AT = 1764500000.0


def nccl_hang_report(saved_to: Path | None = Path("/var/lib/gpuwatch/dumps/trainer-b_dpo-2rank.json")) -> DumpReport:
    processes = [
        h200_dump("nccl_hang_pyspy_hang_1037.txt"),  # the torchrun agent
        h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0),
        h200_dump("nccl_hang_pyspy_hang_1085.txt", rank=1),
    ]
    return DumpReport(host="trainer-b", job="dpo-2rank", taken_at=TAKEN_AT, pyspy="/usr/bin/py-spy",
                      pyspy_source="host", processes=processes, analysis=analyse(processes), saved_to=saved_to)

"""Dumps are saved as HOST_ID_NAME_TIME and found by host and short id: two `train.py` jobs on one host
never see each other's dumps (the report of one, the stuck/moving comparison of a re-dump)."""

from __future__ import annotations

from gpuwatch_tui.actions.dump import DumpReport, compare_with_saved, save_report
from gpuwatch_tui.actions.stack_analysis import analyse
from gpuwatch_tui.incident_report import latest_dump
from tests.actions.pyspy_helpers import h200_dump


def dump_of(job_id: str, taken_at: float) -> DumpReport:
    procs = [h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0), h200_dump("nccl_hang_pyspy_hang_1085.txt", rank=1)]
    return DumpReport("node1", "train.py", taken_at, "py-spy", "host", procs, analyse(procs), job_id=job_id)


def test_each_job_finds_only_its_own_dumps(tmp_path):
    mine = save_report(dump_of("abcde", 1000.0), tmp_path)
    other = save_report(dump_of("fghij", 1010.0), tmp_path)  # the other train.py, dumped later
    assert mine.name == "node1_abcde_train.py_19700101T001640Z.json"
    assert other.name.startswith("node1_fghij_train.py_")
    assert latest_dump("node1", "abcde", tmp_path) == mine
    assert latest_dump("node1", "fghij", tmp_path) == other
    assert latest_dump("node1", "abcd", tmp_path) is None  # a prefix of an id is not the id
    assert latest_dump("node2", "abcde", tmp_path) is None and latest_dump("node1", "", tmp_path) is None

    # a re-dump compares with the job's own dump; a third train.py, never dumped, with nothing (by name it
    # would have been compared with the others' dumps and called stuck)
    again = dump_of("fghij", 1020.0)
    compare_with_saved(again, tmp_path)
    assert again.motion is not None
    fresh = dump_of("klmno", 1020.0)
    compare_with_saved(fresh, tmp_path)
    assert fresh.motion is None

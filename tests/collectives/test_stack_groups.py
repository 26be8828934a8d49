"""Every rank's stack grouped, over real py-spy dumps of an H200 job (tests/data/pyspy/README.md): the healthy
ranks are copies of rank 0's real dump (as seven ranks waiting at the same place look), the culprit is the real
rank 1 that wedged outside torch."""

from __future__ import annotations

from dataclasses import replace

from gpuwatch_tui.actions.dump import DumpReport, compare_with_saved, save_report
from gpuwatch_tui.actions.stack_analysis import analyse
from gpuwatch_tui.actions.stack_groups import fold, group_stacks, stack_key
from gpuwatch_tui.actions.stacks import Frame, ProcessDump
from tests.actions.pyspy_helpers import h200_dump


def eight_ranks() -> list[ProcessDump]:
    waiting = h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0)
    culprit = h200_dump("nccl_hang_pyspy_hang_1085.txt", rank=3)
    out = [replace(waiting, pid=2000 + r, rank=r) for r in range(8) if r != 3]
    return out + [replace(culprit, pid=2003), h200_dump("nccl_hang_pyspy_hang_1037.txt")]


def test_seven_waiting_ranks_form_one_group_and_the_odd_rank_is_the_suspect():
    analysis = analyse(eight_ranks())
    groups = analysis.groups
    assert [g.size for g in groups] == [7, 1]  # the torchrun agent is no rank: left out
    big, odd = groups
    assert big.ranks == (0, 1, 2, 4, 5, 6, 7) and not big.suspect
    assert odd.ranks == (3,) and odd.suspect
    assert big.text == "7 ranks in _fused_adam ← make_step.<locals>.step (tinylm.py:109): ranks 0-2,4-7"
    assert odd.text == "rank 3 in <module> (nccl_hang.py:57)  <- suspect"
    assert [s.rank for s in analysis.suspects] == [3]


def test_without_a_classifier_suspect_the_single_smallest_group_is_the_suspect():
    dumps = eight_ranks()[:-1]
    kinds = ["torch"] * len(dumps)  # say the classifier named nobody
    groups = group_stacks(dumps, kinds)
    assert [g.suspect for g in groups] == [False, True]
    # two groups of the same size: nobody stands apart
    half = group_stacks(dumps[:1] + dumps[-1:], ["torch", "torch"])
    assert [g.suspect for g in half] == [False, False]


def test_native_frames_group_by_symbol_not_address():
    base = h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0)
    main = base.main_thread

    def at(addr: str, rank: int) -> ProcessDump:
        native = Frame(f"ncclKernelWait+{addr}", f"/usr/lib/libnccl.so.2", 0, "libnccl.so.2", native=True)
        return replace(base, pid=3000 + rank, rank=rank, threads=(replace(main, frames=(native,) + main.frames),))

    a, b = at("0x7f00aa", 0), at("0x7f11bb", 1)
    assert stack_key(a, "torch") == stack_key(b, "torch")
    assert len(group_stacks([a, b], ["torch", "torch"])) == 1


def test_stopped_and_gone_ranks_group_by_why():
    waiting = [replace(h200_dump("nccl_hang_pyspy_hang_1084.txt"), pid=10 + r, rank=r) for r in range(3)]
    gone = ProcessDump(pid=99, start_ticks=5, ok=False, rank=3, error_code="gone", message="exited")
    analysis = analyse(waiting + [gone])
    assert [g.size for g in analysis.groups] == [3, 1]
    assert analysis.groups[1].text == "rank 3 in gone (exited)  <- suspect"


def test_a_second_dump_tells_stuck_from_moving():
    first = analyse(eight_ranks())
    again = analyse(eight_ranks())
    report = DumpReport("h", "j", 100.0, "py-spy", "host", [], again)
    earlier = DumpReport("h", "j", 95.0, "py-spy", "host", [], first)
    report.compare_with(earlier)
    assert [g.motion for g in report.analysis.groups] == ["stuck", "stuck"]
    assert report.motion.startswith("stuck")
    # the healthy ranks moved on (another line), the culprit did not
    moved = []
    for d in eight_ranks():
        if d.rank not in (3, None):
            main = d.main_thread
            d = replace(d, threads=(replace(main, frames=(replace(main.frames[0], line=881),) + main.frames[1:]),))
        moved.append(d)
    later = DumpReport("h", "j", 101.0, "py-spy", "host", [], analyse(moved))
    later.compare_with(earlier)
    assert [(g.ranks, g.motion) for g in later.analysis.groups] == [((0, 1, 2, 4, 5, 6, 7), "moving"), ((3,), "stuck")]
    assert later.motion == "mixed: rank 3 stuck, the rest moved"
    # too long after: no comparison
    stale = DumpReport("h", "j", 1000.0, "py-spy", "host", [], analyse(moved))
    stale.compare_with(earlier)
    assert stale.motion is None


def test_a_dump_from_another_gpuwatch_is_compared_with_the_one_it_saved(tmp_path):
    """`gpuwatch dump` twice from the shell: each run is a new process, so the earlier dump is read back
    from the file the first run saved (only that job's, only within the window)."""
    earlier = DumpReport("gpu-b", "train.py", 95.0, "py-spy", "host", [], analyse(eight_ranks()))
    save_report(earlier, tmp_path)
    other = DumpReport("gpu-b", "train.py_other", 99.0, "py-spy", "host", [], analyse(eight_ranks()))
    save_report(other, tmp_path)  # another job whose name starts alike: never its earlier dump
    (tmp_path / "gpu-b_train.py_20261206T000000Z.json").write_text("{half a file")
    report = DumpReport("gpu-b", "train.py", 100.0, "py-spy", "host", [], analyse(eight_ranks()))
    report.saved_to = save_report(report, tmp_path)
    compare_with_saved(report, tmp_path)
    assert [g.motion for g in report.analysis.groups] == ["stuck", "stuck"]
    renewed = [replace(d, start_ticks=d.start_ticks + 1) for d in eight_ranks()]  # a new run: same pids, new starts
    fresh = DumpReport("gpu-b", "train.py", 101.0, "py-spy", "host", [], analyse(renewed))
    compare_with_saved(fresh, tmp_path)
    assert fresh.motion is None and all(g.motion is None for g in fresh.analysis.groups)
    late = DumpReport("gpu-b", "train.py", 100.0 + 301.0, "py-spy", "host", [], analyse(eight_ranks()))
    compare_with_saved(late, tmp_path)
    assert late.motion is None


def test_fold():
    assert fold([0, 1, 2, 4, 5, 7]) == "ranks 0-2,4-5,7"
    assert fold([3]) == "rank 3" and fold([]) == ""

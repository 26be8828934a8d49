"""Stack analysis over real py-spy dumps recorded on an H200 (tests/data/pyspy/README.md)."""

from __future__ import annotations

from dataclasses import replace

from gpuwatch_tui.actions.stack_analysis import analyse, classify_process, frames_text, phase_hint
from gpuwatch_tui.actions.stacks import Frame, ProcessDump, ThreadStack
from tests.actions.pyspy_helpers import h200_dump


def nccl_hang() -> list[ProcessDump]:
    return [
        h200_dump("nccl_hang_pyspy_hang_1037.txt"),  # the torchrun agent
        h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0),
        h200_dump("nccl_hang_pyspy_hang_1085.txt", rank=1),
    ]


def test_text_fixture_reads_as_pyspy_json_shape():
    rank0 = h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0)
    main = rank0.main_thread
    assert main.name == "MainThread" and main.active and main.os_thread_id == 1084
    assert main.frames[0] == Frame("_fused_adam", "torch/optim/adam.py", 880, "adam.py")
    assert len(rank0.threads) == 3 and main.frames[-1].where == "<module> (nccl_hang.py:59)"


def test_nccl_hang_names_rank_1_pid_1085_as_the_suspect():
    analysis = analyse(nccl_hang())
    assert analysis.job_kind == "collective-hang"
    assert [s.pid for s in analysis.suspects] == [1085]
    assert analysis.suspects[0].rank == 1
    assert analysis.of(1084).kind == "collective"  # busy in the op that syncs, not in all_reduce
    assert analysis.of(1037).kind == "launcher"  # the agent is idle too, but never the suspect
    assert "suspect rank 1 (pid 1085)" in analysis.summary
    assert "no torch frame" in analysis.summary and "nccl_hang.py:57" in analysis.summary
    assert "rank 0 (pid 1084)" in analysis.summary and "_fused_adam" in analysis.summary


def test_nccl_hang_rank_diff_marks_the_frames_that_differ():
    analysis = analyse(nccl_hang())
    # no frame is shared: rank 0 is deep in torch, rank 1 at another line of the script
    assert all(analysis.of(1085).differs) and all(analysis.of(1084).differs)
    assert len(analysis.of(1084).differs) == 8
    lines = frames_text(h200_dump("nccl_hang_pyspy_hang_1085.txt").main_thread, analysis.of(1085).differs)
    assert lines == ["* <module> (nccl_hang.py:57)"]


def test_rank_diff_leaves_shared_frames_unmarked():
    rank0 = h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0)
    # a second rank at the very same step: its stack shares every frame but the innermost
    main = rank0.main_thread
    other_main = replace(main, frames=(Frame("_multi_tensor_adam", "torch/optim/adam.py", 700, "adam.py"),)
                         + main.frames[1:])
    rank1 = replace(rank0, pid=2000, rank=1, threads=(other_main,))
    analysis = analyse([rank0, rank1])
    assert analysis.of(2000).differs == (True,) + (False,) * 7
    assert analysis.job_kind == "torch" and analysis.suspects == ()
    assert phase_hint(analysis) is None  # busy in torch on every rank: the stacks decide nothing


def test_phase_hint_for_the_nccl_hang():
    phase, detail, evidence = phase_hint(analyse(nccl_hang()))
    assert (phase, detail) == ("stalled", "nccl-spin")
    assert "rank 1 (pid 1085)" in evidence


def test_lock_hang_after_training_is_lock():
    dump = h200_dump("hang_after_training_pyspy_hung_1238.txt")
    verdict = classify_process(dump)
    assert verdict.kind == "lock"
    assert "Event.wait" in verdict.why and "hang_after_training.py:36" in verdict.why
    analysis = analyse([dump])
    assert analysis.job_kind == "lock"
    assert phase_hint(analysis)[:2] == ("stalled", "no-progress")


def test_stopped_and_gone_ranks_are_suspects_in_a_collective_hang():
    rank0 = h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0)
    stopped = replace(h200_dump("nccl_hang_pyspy_hang_1085.txt", rank=1), state_before="T", state_after="T")
    analysis = analyse([rank0, stopped])
    assert [s.pid for s in analysis.suspects] == [1085]
    assert analysis.of(1085).kind == "stopped" and "state T" in analysis.summary
    gone = ProcessDump(pid=1085, start_ticks=1, ok=False, rank=1, error_code="gone", message="process 1085 has exited")
    analysis = analyse([rank0, gone])
    assert [s.pid for s in analysis.suspects] == [1085] and "has exited" in analysis.summary


def test_every_rank_in_an_explicit_collective_has_no_suspect_here():
    barrier = Frame("barrier", "/v/torch/distributed/distributed_c10d.py", 4200, "distributed_c10d.py")
    main = ThreadStack(1, "MainThread", 10, True, False, (barrier, Frame("<module>", "/j/train.py", 9, "train.py")))
    dumps = [ProcessDump(pid=p, start_ticks=1, ok=True, rank=r, threads=(replace(main, os_thread_id=p),))
             for r, p in ((0, 10), (1, 11))]
    analysis = analyse(dumps)
    assert analysis.job_kind == "collective" and analysis.suspects == ()
    assert "another host" in analysis.summary
    assert phase_hint(analysis)[:2] == ("stalled", "nccl-spin")


def _single(frames: tuple[Frame, ...], active: bool = False) -> ProcessDump:
    return ProcessDump(pid=5, start_ticks=1, ok=True, threads=(ThreadStack(1, "MainThread", 5, active, False, frames),))


def test_compile_data_and_sleep_classes():
    compiling = _single((
        Frame("compile_fx", "/v/torch/_inductor/compile_fx.py", 900),
        Frame("_fn", "/v/torch/_dynamo/eval_frame.py", 600),
        Frame("<module>", "/j/train.py", 30),
    ), active=True)
    assert classify_process(compiling).kind == "compiling"
    assert phase_hint(analyse([compiling]))[0] == "compiling"
    # a compiled model's every step runs through eval_frame: that alone is not compiling
    compiled_step = _single((Frame("_fn", "/v/torch/_dynamo/eval_frame.py", 600), Frame("<module>", "/j/t.py", 3)),
                            active=True)
    assert classify_process(compiled_step).kind == "torch"
    data = _single((
        Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 327),
        Frame("Queue.get", "/usr/lib/python3.11/queue.py", 180),
        Frame("_MultiProcessingDataLoaderIter._try_get_data", "/v/torch/utils/data/dataloader.py", 1130),
        Frame("<module>", "/j/train.py", 40),
    ))
    assert classify_process(data).kind == "data"
    assert phase_hint(analyse([data]))[:2] == ("stalled", "data")
    sleeping = _single((Frame("<module>", "/j/train.py", 57, "train.py", (), "time.sleep(1)"),))
    assert classify_process(sleeping).kind == "sleep"
    acquiring = _single((Frame("<module>", "/j/train.py", 5, "train.py", (), "lock.acquire()"),))
    assert classify_process(acquiring).kind == "lock"

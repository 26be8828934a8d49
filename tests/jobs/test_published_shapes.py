"""What the engine reads from shapes of published logs, one behaviour at a time (the whole excerpts, with
their sources, are in tests/data/published_logs and test_published_logs.py)."""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs.interpret import LogInterpreter, last_frame
from gpuwatch_tui.jobs.observation import ExitFacts, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import infer_phase
from gpuwatch_tui.jobs.progress import ProgressTracker, parse_clock, parse_number, read_fields
from gpuwatch_tui.jobs.rules import RuleSet

RULES = RuleSet.with_user_rules()


def feed(lines: list[str]) -> LogInterpreter:
    interp = LogInterpreter(RULES)
    for i, line in enumerate(lines):
        interp.feed_line(line, 1000.0 + i)
    return interp


def ended(interp: LogInterpreter):
    """The verdict on a process gpuwatch did not start that exits after these lines (status unknown)."""
    t = 1000.0 + interp.seq
    samples = [ResourceSample(time=s, cpu_s=s - 900.0, children_cpu_s=0.0, gpus=(), states=("R",)) for s in (995.0, t)]
    progress = interp.progress.current
    log = LogFacts(path="/run/train.log", total_bytes=1000, last_growth_at=t, hint=interp.hint, failure=interp.failure,
                   failures=len(interp.failures), finished_at=interp.finished_at,
                   progress=progress if progress.updated_at is not None else None,
                   last_progress_at=interp.last_progress_at, exit_code=interp.exit_code, signal=interp.signal,
                   observed=True, size=1000, mtime=t, finished_text=interp.finished_text,
                   finished_seq=interp.finished_seq)
    obs = JobObservation(samples=samples, started_at=900.0, log=log, exit=ExitFacts(t + 1.0), has_gpus=False)
    return infer_phase(obs, t + 2.0)


@pytest.mark.parametrize("text,seconds", [
    ("05:12", 312), ("1:02:03", 3723), ("2d 01:00:00", 176400), ("1 day, 5:36:12", 106572),
    ("3 days, 0:00:01", 259201), ("12s", 12), ("1h 02m 03s", 3723), ("?", None), ("12x", None), ("soon", None),
])
def test_remaining_times_as_logs_print_them(text, seconds):
    assert parse_clock(text) == seconds


def test_numbers_with_thousands_separators_and_not_otherwise():
    assert parse_number("14,754") == 14754
    assert parse_number("1,2") is None and parse_number("12,34,567") is None


def test_a_bar_is_one_bar_whatever_numbers_its_description_carries():
    tracker = ProgressTracker()
    frames = [  # torchtune: the description holds the step and the loss
        "1|30|Loss: 1.1868056058883667:  30%|██▉       | 30/101 [07:51<18:27, 15.59s/it]",
        "1|31|Loss: 1.1992870569229126:  31%|███       | 31/101 [08:13<20:26, 17.52s/it]",
        "1|32|Loss: 1.1992870569229126:  32%|███▏      | 32/101 [08:27<18:38, 16.21s/it]",
    ]
    for i, frame in enumerate(frames):
        tracker.merge(read_fields(RULES.match(frame).progress), 100.0 + i)
    assert (tracker.current.step, tracker.current.total, tracker.current.epoch) == (32, 101, 1)
    # ... but another bar (its words differ) does not move the running one
    tracker.merge(read_fields(RULES.match("Validation DataLoader 0:  50%|█████     | 78/157 [00:02<00:02, "
                                          "38.79it/s]").progress), 104.0)
    assert tracker.current.step == 32


def test_syslog_escaped_carriage_returns_read_as_the_last_frame():
    line = ("[1,mpirank:0,algo-1]<stdout>:#015Epoch 0:   0% 0/2 [00:00<?, ?it/s, loss=2.29, v_num=0]        "
            "#015Epoch 1:   0% 0/2 [00:00<?, ?it/s, loss=2.29, v_num=0]")
    assert last_frame(line).startswith("Epoch 1:")
    assert last_frame("x#015Validation: 0it [00:00, ?it/s]#015   #033[A") == "Validation: 0it [00:00, ?it/s]"
    p = feed([line]).progress.current
    assert (p.step, p.total, p.epoch, p.loss) == (0, 2, 1, 2.29)


def test_a_loss_on_an_evaluation_line_is_not_the_training_loss():
    interp = feed(["Train: 1 [  32/33 (100%)]  Loss: 0.5411 (0.313)  Time: 0.089s,   90.32/s  LR: 5.000e-04",
                   "Test: [   0/29]  Time: 0.537 (0.537)  Loss:  0.3071 (0.3071)  Acc@1: 87.5000 (87.5000)"])
    assert interp.hint.phase == "evaluating"
    assert interp.progress.current.loss == pytest.approx(0.5411)
    assert (interp.progress.current.step, interp.progress.current.epoch) == (32, 1)


def test_lightning_epoch_bar_counting_validation_batches_stays_evaluating():
    bar = "Epoch 0:  92%|█████████▏| {}/1016 [00:33<00:02, 27.75it/s, loss=0.223, v_num=77]"
    interp = feed([bar.format(936),
                   "Validation DataLoader 0:  50%|█████     | 78/157 [00:02<00:02, 38.79it/s]",
                   bar.format(937), bar.format(938)])
    assert interp.hint.phase == "evaluating"
    assert interp.progress.current.step == 938
    interp.feed_line(bar.format(1016), 1010.0)  # validation over
    assert interp.hint.phase == "training"


@pytest.mark.parametrize("code,reason", [(-9, "killed"), (-11, "segfault"), (-15, "signal")])
def test_a_launcher_reporting_a_signal_as_the_root_cause(code, reason):
    interp = feed([
        f"E1130 03:43:34.039000 5439 torch/distributed/elastic/multiprocessing/api.py:1002] failed "
        f"(exitcode: {code}) local_rank: 1 (pid: 5474) of binary: /usr/bin/python",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "Root Cause (first observed failure):",
        f"  exitcode  : {code} (pid: 5474)",
    ])
    assert interp.failure.detail == reason
    assert ended(interp).detail == reason


def test_a_rank_the_launcher_sigtermed_is_not_the_reason():
    interp = feed([
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 3, in <module>',
        "[rank1]: ValueError: boom",
        "E1130 api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 5382) of binary: /usr/bin/python",
        "  exitcode  : -15 (pid: 5381)  (SIGTERM)",
        "  traceback : Signal 15 (SIGTERM) received by PID 5381",
        "Root Cause (first observed failure):",
        "  exitcode  : 1 (pid: 5382)",
    ])
    assert interp.failure.detail == "exception"


@pytest.mark.parametrize("line,reason", [
    ("Epoch 1:  45%|████▌     | 100/222 [00:30<00:36,  3.31it/s, loss=0.234]Killed", "killed"),
    ("run.sh: line 27:   318 Killed                  python train.py", "killed"),
    ("已杀死", "killed"),
    ("segmentation fault (core dumped)  python train.py", "segfault"),
    ("Segmentation fault (core dumped)", "segfault"),
    ("slurmstepd: error: *** JOB 494583 ON node7 CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***", "signal"),
    ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)", "nccl-timeout"),
    ("RuntimeError: cuda runtime error (2) : out of memory at /pytorch/torch/lib/THC/generic/THCStorage.cu:58", "oom"),
])
def test_crash_reasons_anywhere_in_a_line(line, reason):
    interp = feed(["step 10 loss 2.0", line])
    assert interp.failure.detail == reason
    assert ended(interp).detail == reason


def test_a_clean_finish_is_the_runs_own_summary_line_as_evidence():
    v = ended(feed(["Epoch: [49]  [1500/1504]  eta: 0:00:01  loss: 2.1234 (2.2345)", "Training time 5:47:14"]))
    assert v.phase == "finished"
    assert "log: Training time 5:47:14" in v.evidence


def test_an_error_survived_before_the_summary_is_still_a_finish_and_one_after_it_is_a_crash():
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert ended(feed([error, "Training completed"])).phase == "finished"
    assert ended(feed(["Training completed", error])).phase == "crashed"


def test_a_step_line_with_a_time_in_it_is_not_a_summary():
    interp = feed(["iter 10 | train time: 0.31s | loss 2.0"])
    assert interp.finished_at is None
    assert ended(interp).phase == "crashed"


def test_a_process_that_ends_right_after_a_save_or_in_its_last_epoch_finished():
    save = ended(feed(["step 100 loss 2.0",
                       "INFO:torchtune.utils.logging:Model checkpoint of size 4.98 GB saved to /tmp/hf_model_0003_0.pt"]))
    assert save.phase == "finished" and any("ends with a save" in e for e in save.evidence)
    assert ended(feed(["30/42 of epoch 30/30 class : 0.047 - acc class : 100.00 [bs:128]"])).phase == "finished"
    assert ended(feed(["30/42 of epoch 29/30 class : 0.047 - acc class : 100.00 [bs:128]"])).phase == "crashed"


def test_a_launchers_non_zero_exit_code_is_its_child_failing():
    interp = feed(["[2024-03-20 20:31:29,269] [ERROR] [launch.py:321:sigkill_handler] ['python', '-u', 'train.py'] "
                   "exits with return code = 1"])
    assert ended(interp).detail == "child-failed"


def test_training_that_goes_on_after_a_completion_line_was_not_finished():
    interp = feed(["step 10 loss 2.0", "Training completed for epoch 1", "step 11 loss 1.9"])
    assert interp.finished_at is None
    assert ended(interp).phase == "crashed"

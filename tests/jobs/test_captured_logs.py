"""Every built-in rule family against output captured from the real libraries (tests/data/logs)."""

from __future__ import annotations

import pytest

from .helpers import find_log, replay


def test_transformers_v4_loading_bar():
    _, interp, hints = replay(find_log("transformers-4.57.6-loading"), chunk=64)
    assert hints == ["loading"]
    assert interp.hint.detail == "checkpoint-shards"
    assert interp.phase_progress["step"] == "4" and interp.phase_progress["total"] == "4"
    # Loading bars are not training progress.
    assert interp.progress.current.step is None


def test_transformers_v5_loading_weights_bar():
    _, interp, hints = replay(find_log("transformers-5.24.0-loading"), chunk=64)
    assert hints == ["loading"]
    assert interp.hint.detail == "weights"
    assert interp.phase_progress["total"] == "21"
    assert interp.progress.current.rate is None  # the loading bar's it/s is not a training rate


@pytest.mark.parametrize("version,last_loss", [("4.57.6", 4.5455), ("5.24.0", 4.849)])
def test_hf_trainer_dicts_v4_floats_and_v5_strings(version, last_loss):
    _, interp, hints = replay(f"transformers-{version}-trainer.log")
    p = interp.progress.current
    assert p.loss == pytest.approx(last_loss)
    assert p.epoch == pytest.approx(1.0)
    assert p.lr == pytest.approx(6.25e-06)
    assert p.total == 8
    assert interp.finished_at is not None  # the train_runtime dict
    assert "training" in hints
    assert not interp.failures


@pytest.mark.parametrize("version", ["4.57.6", "5.24.0"])
def test_hf_trainer_info_level_eval_and_checkpoint(version):
    _, interp, hints = replay(f"transformers-{version}-trainer-info.log", chunk=256)
    assert "evaluating" in hints and "checkpointing" in hints and "training" in hints
    assert interp.finished_at is not None


def test_transformers_v5_save_writes_shards_as_checkpointing():
    _, interp, hints = replay(find_log("transformers-5.24.0-save"), chunk=64)
    assert hints == ["checkpointing"]


def test_tqdm_basic_bar_rate_and_total():
    _, interp, hints = replay(find_log("tqdm-4.70.1-basic"), chunk=80)
    p = interp.progress.current
    assert (p.step, p.total, p.unit) == (200, 200, "it/s")
    assert p.rate == pytest.approx(192.84)
    assert p.desc == "train" and hints == ["training"]


def test_tqdm_seconds_per_iteration():
    _, interp, _ = replay(find_log("tqdm-4.70.1-slow"), chunk=50)
    p = interp.progress.current
    assert p.unit == "s/it" and p.rate == pytest.approx(1.30)
    assert (p.step, p.total) == (3, 3)


def test_tqdm_unit_scale_tokens():
    _, interp, _ = replay(find_log("tqdm-4.70.1-tokens"), chunk=70)
    p = interp.progress.current
    assert p.step == pytest.approx(2.0e6) and p.total == pytest.approx(2.0e6)
    assert p.unit == "tok/s" and p.rate == pytest.approx(2.40e6)


def test_tqdm_without_total():
    _, interp, _ = replay(find_log("tqdm-4.70.1-nototal"), chunk=60)
    p = interp.progress.current
    assert p.step == 3000 and p.total is None and p.unit == "it/s"


def test_tqdm_postfix_loss_and_epoch_label():
    _, interp, _ = replay(find_log("tqdm-4.70.1-postfix"), chunk=100)
    p = interp.progress.current
    assert p.loss == pytest.approx(0.0833)
    assert p.epoch == 1 and p.epochs == 3


def test_tqdm_rich_prints_only_the_final_frame():
    buf, interp, _ = replay(find_log("tqdm-4.70.1-rich"))
    assert buf.total_lines == 2  # nothing live when not on a terminal
    assert (interp.progress.current.step, interp.progress.current.total) == (50, 50)


def test_lightning_tqdm_bar_validation_and_fit_stopped():
    _, interp, hints = replay(find_log("lightning-2.6.6-tqdm"), chunk=200)
    assert hints[0] == "starting"
    assert "evaluating" in hints and "training" in hints
    p = interp.progress.current
    assert p.epoch == 1 and p.loss is not None
    assert interp.finished_at is not None


def test_lightning_rich_bar_final_frame():
    _, interp, hints = replay(find_log("lightning-2.6.6-rich"))
    p = interp.progress.current
    assert (p.step, p.total) == (8, 8) and p.epoch == 1 and p.epochs == 1
    assert interp.finished_at is not None and hints[0] == "starting"


def test_torchrun_rank_traceback_and_child_failed_block():
    _, interp, _ = replay(find_log("torchrun-2.13.0-raise"), chunk=300)
    f = interp.failure
    assert f.detail == "exception" and f.rank == 1
    assert f.summary.startswith("ValueError: boom")
    assert interp.exit_code == 1 and interp.exit_rank == 1  # the root cause, not the SIGTERMed rank
    assert {x.detail for x in interp.failures} >= {"exception", "child-failed"}


def test_torchrun_rank_killed_by_signal():
    _, interp, _ = replay(find_log("torchrun-2.13.0-sigkill"), chunk=300)
    assert interp.exit_code == -9
    assert interp.signal in ("SIGKILL", "SIGTERM")
    assert interp.failure.detail == "killed"  # the root cause: a rank SIGKILLed, not the agent's ChildFailedError


def test_dataloader_worker_killed():
    _, interp, _ = replay(find_log("dataloader-2.13.0-worker-killed"), chunk=500)
    assert interp.failure.detail == "worker-died"
    assert "DataLoader worker" in interp.failure.summary


@pytest.mark.parametrize("case", ["logs", "autotune"])
def test_torch_compile_dynamo_and_inductor_logs(case):
    _, interp, hints = replay(find_log(f"torch-compile-2.13.0-{case}"), chunk=1000)
    assert hints == ["compiling", "training"]
    assert interp.progress.current.loss is not None


def test_torch_compile_recompile():
    buf, interp, hints = replay(find_log("torch-compile-2.13.0-recompile"))
    details = [interp.rules.match(line).detail for line in buf.lines()]
    assert "recompile" in details


def test_accelerate_launch_notes_and_progress():
    _, interp, hints = replay(find_log("accelerate-1.15.0-ok"))
    assert hints[0] == "starting"
    p = interp.progress.current
    assert (p.step, p.total) == (5, 5)


def test_accelerate_launch_failure():
    _, interp, _ = replay(find_log("accelerate-1.15.0-raise"))
    assert interp.failure is not None
    assert "failed on purpose" in interp.failure.summary or interp.exit_code not in (None, 0)


def test_deepspeed_setup_and_steps():
    try:
        name = find_log("deepspeed-")
    except AssertionError:
        pytest.skip("no DeepSpeed capture on this machine")
    _, interp, hints = replay(name)
    assert hints == ["starting", "training"]
    assert (interp.progress.current.step, interp.progress.current.total) == (4, 4)


# ---- GPU-only messages (format from PyTorch source; see tests/data/logs/README.md) ----------
def test_cuda_oom_traceback():
    _, interp, _ = replay("from-source-cuda-oom.log")
    assert interp.failure.detail == "oom"
    assert "Tried to allocate 2.00 GiB" in interp.failure.summary


def test_cuda_error_with_rank_prefix():
    _, interp, _ = replay("from-source-cuda-error.log")
    assert interp.failure.detail == "cuda-error" and interp.failure.rank == 1


def test_nccl_watchdog_timeout():
    _, interp, _ = replay("from-source-nccl-watchdog.log")
    f = interp.failure
    assert f.detail == "nccl-timeout" and f.rank == 0
    assert interp.last_match.fields["ran_ms"] == "600081"


def test_max_autotune_is_compiling():
    _, interp, hints = replay("from-source-autotune.log")
    assert hints == ["compiling"] and interp.hint.detail == "max-autotune"

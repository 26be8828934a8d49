"""Table: one log line -> (step, total, rate, unit, loss), through the real rule pack and tracker.

Rows marked with a captured log file are real lines, looked up in tests/data/logs (the test fails if
the line is not in that file, so the table cannot drift from what the libraries really print). The
other rows are the forms training scripts print by hand (nanoGPT, torchtitan-, Megatron-style):
`key=value`, `key: value`, `key value` and `value unit`. The rule that matters for every row: a
number is never taken from a neighbouring key (the loss is not a rate, MFU is not a loss).
"""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.rules import RuleSet

from .helpers import LOGS

_ = None  # "not on this line"

# (captured log or None, line, (step, total, rate, unit, loss))
ROWS = [
    # ---- the bug as reported
    (None, "step 40/100000 loss=9.0465 tok/s=1510725", (40, 100000, 1510725, "tok/s", 9.0465)),
    # ---- key=value
    (None, "step=40 loss=2.5 tokens/s=1510725", (40, _, 1510725, "tokens/s", 2.5)),
    (None, "iter=7 loss=0.125 lr=3e-4 samples/s=812.5", (7, _, 812.5, "samples/s", 0.125)),
    (None, "step 3/10 loss=1.0 it/s=4.5", (3, 10, 4.5, "it/s", 1.0)),
    (None, "step 3/10 loss=1.0 s/it=2.25", (3, 10, 2.25, "s/it", 1.0)),
    (None, "step 3/10 loss=1.0 img/s=950", (3, 10, 950, "img/s", 1.0)),
    (None, "step 3/10 loss=1.0 tok/s=1.51M", (3, 10, 1.51e6, "tok/s", 1.0)),
    (None, "step 12 | loss=3.25 | tok/s=40000 | mfu=41.2%", (12, _, 40000, "tok/s", 3.25)),
    # ---- key: value
    (None, "step: 40/1000 | loss: 9.0465 | tok/s: 1510725", (40, 1000, 1510725, "tok/s", 9.0465)),
    (None, "step: 5, loss: 0.5, lr: 0.0003, tokens/sec: 8000", (5, _, 8000, "tokens/sec", 0.5)),
    (None, "step: 5 loss: 0.5 mfu: 38.5 samples/s: 64", (5, _, 64, "samples/s", 0.5)),
    # ---- key value (space only)
    (None, "step 40 loss 9.0465 tok/s 1510725", (40, _, 1510725, "tok/s", 9.0465)),
    # ---- value unit
    (None, "step 40/100000 | loss 9.0465 | 1510725 tok/s", (40, 100000, 1510725, "tok/s", 9.0465)),
    (None, "step 40 loss 2.0 1.51M tok/s", (40, _, 1.51e6, "tok/s", 2.0)),
    (None, "step 40 loss 2.0 2.42Mtok/s", (40, _, 2.42e6, "tok/s", 2.0)),
    (None, "step 9 loss 0.5 | 128.0 samples/s | lr 1e-4", (9, _, 128.0, "samples/s", 0.5)),
    (None, "step 9 loss 0.5, 3.5 it/s", (9, _, 3.5, "it/s", 0.5)),
    (None, "step 9 loss 0.5, 1.25 s/it", (9, _, 1.25, "s/it", 0.5)),
    (None, "epoch 1 step 9 loss 0.5 (812 img/s)", (9, _, 812, "img/s", 0.5)),
    (None, "throughput: 1510725 tok/s, loss: 9.0465, step: 40", (40, _, 1510725, "tok/s", 9.0465)),
    # ---- neighbours that are not the rate or the loss
    (None, "iter 100: loss 4.2341, time 123.45ms, mfu 35.12%", (100, _, _, _, 4.2341)),  # nanoGPT
    (None, "step 100: train loss 4.2341, val loss 4.3012", (100, _, _, _, 4.2341)),  # nanoGPT eval
    (None, "step 10 lr 0.0003 loss 2.5", (10, _, _, _, 2.5)),
    (None, "step 10 loss_scale 65536 loss 2.5", (10, _, _, _, 2.5)),
    (None, "step 10 val_loss=3.0 loss=2.5", (10, _, _, _, 2.5)),
    (None, "step 10 grad_norm: 1.5 tok/s: 900", (10, _, 900, "tok/s", _)),
    (None, "step 10 loss=2.5 mfu=0.41 tok/s 12000", (10, _, 12000, "tok/s", 2.5)),
    # ---- real captured lines
    ("accelerate-1.15.0-ok.log", "[RANK 0] step 2/5 loss=0.4970", (2, 5, _, _, 0.4970)),
    ("deepspeed-0.19.8-train.log", "step 3/4 loss 0.2176", (3, 4, _, _, 0.2176)),
    ("torchrun-2.13.0-raise.log", "rank 0 step 2/10 loss 0.5000", (2, 10, _, _, 0.5)),
    ("nccl-2.11.0-watchdog-timeout.log", "rank 0 step 2/100 loss 0.5000", (2, 100, _, _, 0.5)),
    ("dataloader-2.13.0-worker-killed.log", "step 2 batch 38", (2, _, _, _, _)),
    ("torch-compile-2.13.0-recompile.log", "{'loss': 0.0457, 'step': 2}", (2, _, _, _, 0.0457)),
    ("tqdm-4.70.1-basic.log", "train:  20%|██        | 40/200 [00:00<00:00, 193.15it/s]", (40, 200, 193.15, "it/s", _)),
    ("tqdm-4.70.1-slow.log", "step:  67%|██████▋   | 2/3 [00:02<00:01,  1.30s/it]", (2, 3, 1.30, "s/it", _)),
    ("tqdm-4.70.1-tokens.log", "tokens:  25%|██▌       | 500k/2.00M [00:00<00:00, 2.42Mtok/s]",
     (500e3, 2e6, 2.42e6, "tok/s", _)),
    ("tqdm-4.70.1-nototal.log", "282it [00:00, 1413.31it/s]", (282, _, 1413.31, "it/s", _)),
    ("tqdm-4.70.1-postfix.log", "Epoch 1/3:  17%|█▋        | 5/30 [00:00<00:00, 44.04it/s, loss=0.278, lr=0.0003]",
     (5, 30, 44.04, "it/s", 0.278)),
    ("tqdm-4.70.1-rich.log", "rich 100% ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 50/50  [ 0:00:00 < 0:00:00 , 93 it/s ]",
     (50, 50, 93, "it/s", _)),
    ("lightning-2.6.6-tqdm.log", "Epoch 0:  38%|███▊      | 3/8 [00:00<00:00, 164.33it/s, v_num=0, train_loss=1.290]",
     (3, 8, 164.33, "it/s", 1.290)),
    ("lightning-2.6.6-tqdm.log", "Epoch 0:   0%|          | 0/8 [00:00<?, ?it/s, v_num=0, train_loss=1.500, val_loss=0.957]",
     (0, 8, _, _, 1.5)),
    ("transformers-4.57.6-trainer.log", " 38%|███▊      | 3/8 [00:00<00:00, 40.03it/s]", (3, 8, 40.03, "it/s", _)),
    ("transformers-4.57.6-trainer.log",
     "{'loss': 4.5585, 'grad_norm': 1.533536434173584, 'learning_rate': 5e-05, 'epoch': 0.12}",
     (_, _, _, _, 4.5585)),
    ("transformers-5.24.0-trainer.log", "{'loss': '4.862', 'grad_norm': '1.636', 'learning_rate': '5e-05', 'epoch': '0.125'}",
     (_, _, _, _, 4.862)),
]


def _progress_after(line: str):
    interp = LogInterpreter(RuleSet.with_user_rules())
    interp.feed_line(line, 1000.0)
    p = interp.progress.current
    return p.step, p.total, p.rate, p.unit, p.loss


@pytest.mark.parametrize("source,line,expected", ROWS, ids=[f"{i:02d}" for i in range(len(ROWS))])
def test_line_gives_step_total_rate_unit_loss(source, line, expected):
    if source is not None:
        text = (LOGS / source).read_bytes().decode("utf-8", "replace").replace("\r", "\n")
        assert line in text.splitlines() or line in text, f"row is not a real line of {source}"
    got = _progress_after(line)
    assert got[3] == expected[3], f"unit of {line!r}: {got}"
    for name, g, e in zip(("step", "total", "rate", "unit", "loss"), got, expected):
        if e is None or isinstance(e, str):
            assert g == e, f"{name} of {line!r}: {got}"
        else:
            assert g == pytest.approx(e), f"{name} of {line!r}: {got}"


def test_learning_rate_and_epoch_are_read_beside_rate_and_loss():
    interp = LogInterpreter(RuleSet.with_user_rules())
    interp.feed_line("epoch 2 step 40/100 loss=1.5 lr=3e-4 tok/s=1200", 1000.0)
    p = interp.progress.current
    assert (p.lr, p.epoch, p.rate, p.loss) == (pytest.approx(3e-4), 2, 1200, 1.5)


def test_a_captured_log_replayed_keeps_the_rate_off_the_loss():
    """Every line of every captured log: whenever both are read, the rate is never the loss."""
    for path in sorted(LOGS.glob("*.log")):
        interp = LogInterpreter(RuleSet.with_user_rules())
        text = path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
        for i, line in enumerate(text.splitlines()):
            m = interp.rules.match(line)
            rate, loss = m.progress.get("rate"), m.progress.get("loss")
            assert not (rate and loss and rate == loss), f"{path.name}:{i + 1}: {line!r}"

from __future__ import annotations

import pytest

from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.rules import RuleSet, builtin_rules, parse_rules


def test_builtin_pack_loads_and_names_are_unique():
    rules = builtin_rules()
    assert len(rules) > 40
    assert len({r.name for r in rules}) == len(rules)


def test_user_rule_with_progress_groups_and_phase():
    rules = parse_rules([{"name": "mine", "pattern": r"it=(?P<step>\d+)/(?P<total>\d+) L=(?P<loss>[\d.]+)",
                          "phase": "training"}], "hosts.toml")
    interp = LogInterpreter(RuleSet.with_user_rules(rules))
    interp.feed_line("it=5/100 L=0.25", 1.0)
    p = interp.progress.current
    assert (p.step, p.total, p.loss) == (5, 100, 0.25)
    assert interp.hint.rule == "mine"


def test_user_rules_take_precedence_for_the_phase():
    rules = parse_rules([{"name": "eval-steps", "pattern": r"^step \d+ eval", "phase": "evaluating"}], "f")
    m = RuleSet.with_user_rules(rules).match("step 10 eval loss 0.5")
    assert m.phase == "evaluating" and m.rule == "eval-steps"


def test_user_event_rule_makes_a_failure():
    rules = parse_rules([{"name": "nan", "pattern": "loss is nan", "event": "error", "detail": "nan-loss"}], "f")
    interp = LogInterpreter(RuleSet.with_user_rules(rules))
    interp.feed_line("loss is nan, stopping", 1.0)
    assert interp.failure.detail == "nan-loss"


@pytest.mark.parametrize("raw,key,expected", [
    ([{"name": "a", "pattern": "("}], "rules[0].pattern", "a valid regular expression"),
    ([{"name": "a", "pattern": "x", "phase": "training"}, {"name": "b", "pattern": "[", "phase": "x"}],
     "rules[1].pattern", "a valid regular expression"),
    ([{"name": "a", "pattern": "x", "phase": "sleeping"}], "rules[0].phase", "one of"),
    ([{"name": "a", "pattern": "x", "event": "boom"}], "rules[0].event", "one of"),
    ([{"pattern": "x", "phase": "training"}], "rules[0].name", "a non-empty string"),
    ([{"name": "a", "pattern": "x", "colour": "red"}], "rules[0].colour", "one of"),
    ([{"name": "a", "pattern": "x"}], "rules[0]", "at least one of"),
    ([{"name": "a", "pattern": "x", "phase": "training"}, {"name": "a", "pattern": "y", "phase": "training"}],
     "rules[1].name", "not used by another rule"),
    (["text"], "rules[0]", "a table"),
])
def test_parse_rules_errors_name_file_key_and_expectation(raw, key, expected):
    with pytest.raises(ConfigError) as info:
        parse_rules(raw, "/etc/gpuwatch/hosts.toml")
    err = info.value
    assert err.file == "/etc/gpuwatch/hosts.toml" and err.key == key
    assert expected in err.expected


def test_generic_lines_from_plain_logging():
    rs = RuleSet.with_user_rules()
    m = rs.match("2024-05-01 12:00:00 INFO iter 1200: loss 2.3456, time 98.2ms")
    assert m.phase == "training" and m.progress["step"] == "1200" and m.progress["loss"] == "2.3456"
    m = rs.match("epoch 3/10 step 120/500 | loss=0.812 | 15234 tok/s")
    assert (m.progress["step"], m.progress["total"], m.progress["epoch"], m.progress["epochs"]) == ("120", "500", "3", "10")
    assert m.progress["rate"] == "15234" and m.progress["unit"] == "tok/s"
    assert rs.match("val_loss 0.5").progress.get("loss") is None
    assert rs.match("  Num update steps per epoch = 8").progress.get("epoch") is None


@pytest.mark.parametrize("line, step", [
    ("step 20", 20), ("[rank0] step 20 allreduce ok", 20), ("Step 20/100", 20), ("iter 20", 20),
    ("epoch 3 step 20", 20), ("[rank1]: iteration 7 done", 7), ("global_step=1200", 1200),
])
def test_generic_progress_lines_are_training_steps(line, step):
    interp = LogInterpreter(RuleSet.with_user_rules())
    interp.feed_line(line, 1.0)
    assert interp.hint is not None and interp.hint.phase == "training", line
    assert interp.progress.current.step == step and interp.last_progress_at == 1.0


@pytest.mark.parametrize("line", [
    "Step 1: torchdynamo start tracing forward /work/train.py:12",
    "Step 2: calling compiler function inductor", "Step 3: torchinductor compiling FORWARDS graph 0",
    "Step 3: torchinductor done compiling FORWARDS graph 0", "Step 2: done compiler function inductor",
    "stepping down the learning rate", "steps: 500 per epoch",
])
def test_lines_that_only_look_like_steps_are_not_training_progress(line):
    m = RuleSet.with_user_rules().match(line)
    assert m.phase != "training" and "step" not in m.progress, (line, m)


@pytest.mark.parametrize("line, step", [
    ("<epoch: 32, iter:   3,000, lr:1.000e-04> l_g_pix: 1.7e-03", 3000), ("step 12,500 loss 2.5", 12500),
    ("iter 12, loss 2.5", 12),  # a comma after the number is punctuation, not a thousands separator
])
def test_steps_with_thousands_separators(line, step):
    assert RuleSet.with_user_rules().match(line).progress.get("step", "").replace(",", "") == str(step), line


@pytest.mark.parametrize("line, epoch", [
    ("[Info: Device_0: train_Ep_11: loss: 4.38811e+02; avg_loss: 4.53619e+02]:  20%|| 11/56", "11"),
    ("val ep_3 done", "3"),
    ("Saving checkpoint to out/model_epoch_11.pth", None),  # a file name, not the epoch the run is in
    ("keep_4 top_k_5", None),
])
def test_snake_case_epoch_tags(line, epoch):
    assert RuleSet.with_user_rules().match(line).progress.get("epoch") == epoch, line


@pytest.mark.parametrize("line, detail", [
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8]", "oom"),
    ("2019-10-24 W op_kernel.cc:1318] OP_REQUIRES failed : Resource exhausted: OOM when allocating tensor", "oom"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 47 bytes.",
     "oom"),
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: No `test_dataloader()` method", "exception"),
    ("[rank1]: requests.exceptions.ConnectionError: HTTPSConnectionPool(host='x')", "exception"),
])
def test_failure_words_outside_a_traceback(line, detail):
    m = RuleSet.with_user_rules().match(line)
    assert [d for e, d, _ in m.events if e == "error"][:1] == [detail], line


@pytest.mark.parametrize("line", [
    "RESOURCE_EXHAUSTED: Received message larger than max (5000 vs. 4194304)",  # gRPC, not memory
    "/usr/lib/python3/site-packages/torch/functional.py:504: UserWarning: torch.meshgrid: in an upcoming release",
    "Loss: ValueError: is what the docs call it",
    "see torch.cuda.OutOfMemory docs for tuning",
    "INFO model.Trainer: using RuntimeError: None as the sentinel",  # a logger's name is not an exception line
])
def test_lines_that_only_look_like_failures(line):
    assert not [e for e, _, _ in RuleSet.with_user_rules().match(line).events if e == "error"], line

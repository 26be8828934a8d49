"""Rules that treat every digit alike are searched on a line only when they matched its shape (the
line with digits made 0) before: the same matches as searching every rule, digits read by the rules
that read them."""

from __future__ import annotations

import re

from gpuwatch_tui.jobs import rules as rules_module
from gpuwatch_tui.jobs.rules import Rule, RuleSet, builtin_rules, digit_blind

from .test_rule_prefilter import Unfiltered, captured_lines


def variants(line: str) -> list[str]:
    """The line, then the same shape with other digits (as the next steps of a training log)."""
    shifted = [line.translate(str.maketrans("0123456789", "".join(str((d + k) % 10) for d in range(10))))
               for k in (1, 7)]
    return [line, *shifted]


def test_same_matches_with_and_without_remembered_shapes_on_captured_logs(monkeypatch):
    lines = [v for line in captured_lines() for v in variants(line)]
    remembering = RuleSet(builtin_rules())
    results = [remembering.match(line) for line in lines]
    monkeypatch.setattr(rules_module, "SHAPES_KEPT", 0)  # every line judged from scratch
    every_rule = Unfiltered(builtin_rules())
    fresh = RuleSet(builtin_rules())
    matched = 0
    for line, got in zip(lines, results):
        assert got == every_rule.match(line) == fresh.match(line), line
        matched += not got.empty
    assert matched > 600


def test_a_rule_that_reads_digits_is_searched_on_every_line_of_a_shape():
    rules = RuleSet([Rule("first", re.compile(r"Step 1: tracing"), phase="compiling")], desc_phases={})
    assert rules.match("Step 2: tracing").empty  # this shape seen, nothing matched
    assert rules.match("Step 1: tracing").phase == "compiling"
    step = RuleSet([Rule("s", re.compile(r"step (?P<step>\d+)"))], desc_phases={})
    assert step.match("step 10").fields == {"step": "10"}
    assert step.match("step 47").fields == {"step": "47"}  # the real line is searched, not the shape


def test_which_patterns_treat_digits_alike():
    assert digit_blind(re.compile(r"(?P<step>\d+)/(?P<total>\d+) [\w.]+ [0-9a-f]+"))
    assert digit_blind(re.compile(r"(?i)epoch\s*[:=]?\s*\d+(?!\d)"))
    assert not digit_blind(re.compile(r"Step 1: "))
    assert not digit_blind(re.compile(r"[0-5]+"))
    assert not digit_blind(re.compile(r"[^1]"))
    assert not digit_blind(re.compile(r"(\d)\1"))  # "11" matches, "12" (same shape) does not


def test_lines_of_a_shape_only_digit_blind_rules_match_are_read_from_its_template(monkeypatch):
    """Such a shape's later lines are not searched: the facts are the line's text where the rules
    matched its first line. They equal searching every rule, numbers, units and events included."""
    lines = [v for line in captured_lines() for v in variants(line)]
    lines += [f"step {s}/100000 loss {2.5 / s:.4f} lr 3.0e-04 tokens/s {90000 + 37 * s}" for s in range(1, 400, 7)]
    filled = []
    real_fill = rules_module.LineTemplate.fill
    monkeypatch.setattr(rules_module.LineTemplate, "fill", lambda self, line: filled.append(line) or real_fill(self, line))
    rules = RuleSet(builtin_rules())
    results = [rules.match(line) for line in lines]
    assert len(filled) > 300 and lines[-1] in filled
    monkeypatch.setattr(rules_module, "SHAPES_KEPT", 0)
    every_rule = Unfiltered(builtin_rules())
    for line, got in zip(lines, results):
        assert got == every_rule.match(line), line
    last = results[-1]
    assert last.progress["step"] == "393" and last.progress["loss"] == f"{2.5 / 393:.4f}"
    assert last.fields["unit"].lower().startswith("tok"), last.fields

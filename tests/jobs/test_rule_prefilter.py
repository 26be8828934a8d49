"""The rule set skips a rule on a line that lacks text every match of it needs: same results."""

from __future__ import annotations

import re
from pathlib import Path

from gpuwatch_tui.jobs.rules import Rule, RuleSet, builtin_rules, required_any

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"


class Unfiltered(RuleSet):
    """Every rule searched on every line, as before the prefilter."""

    def __init__(self, rules):
        super().__init__(rules)
        self._checks = [(rule, "", False) for rule in self.rules]


def captured_lines() -> list[str]:
    lines = []
    paths = [*sorted(LOGS.rglob("*")), *sorted((LOGS.parent / "published_logs").rglob("*.log"))]
    for path in paths:
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            lines += [part for line in text.split("\n") for part in line.split("\r")]
    return lines


def test_same_matches_as_searching_every_rule_on_captured_logs():
    lines = captured_lines()
    assert len(lines) > 1000
    fast, slow = RuleSet(builtin_rules()), Unfiltered(builtin_rules())
    matched = 0
    for line in lines:
        a, b = fast.match(line), slow.match(line)
        assert a == b, line
        matched += not a.empty
    assert matched > 200  # the corpus exercises the rules


def test_needed_text_of_plain_case_and_group_patterns():
    # the longest piece every match needs; an alternation gives one piece per branch
    assert required_any(re.compile(r"\d+%\|[^|]*\|")) == ("%|",)
    assert required_any(re.compile(r"(?P<d>\S+)\s+━+\s")) == ("━",)  # at least one
    # the run before an alternation with each branch's own start: longer pieces than the run alone
    assert required_any(re.compile(r"Saving (model|optimizer) to")) == ("Saving model", "Saving optimizer")
    assert required_any(re.compile(r"(?:: \[|:  \[)x")) == (": [", ":  [")  # a start the parser pulled out
    assert required_any(re.compile(r"(?:loss: )?x")) == ("x",)  # optional part: not needed
    assert required_any(re.compile(r"(step|iter) \d+")) == ("step", "iter")


def test_case_insensitive_pieces_are_folded_ascii_and_unknown_branches_give_none():
    assert required_any(re.compile(r"(?i)epoch")) == ()
    assert required_any(re.compile(r"(?i)Epoch\s+Ünit"), folded=True) == ("epoch",)
    assert required_any(re.compile(r"(?i)Ünit"), folded=True) == ("nit",)  # cut at non-ASCII
    assert required_any(re.compile(r"a(?i:bc)d")) in {("a",), ("d",)}  # the (?i:) part is not plain
    assert required_any(re.compile(r"(?:foo|\d+)x")) == ("x",)  # a branch with no text: none from it
    assert required_any(re.compile(r"foo|\d+")) == ()
    rules = RuleSet([Rule("e", re.compile(r"(?i)EPOCH (?P<epoch>\d+)"))], desc_phases={})
    assert rules.match("epoch 3").fields == {"epoch": "3"}
    assert rules.match("Step 9").empty


def test_a_non_ascii_line_is_searched_by_case_insensitive_rules():
    # Under re.IGNORECASE the Kelvin sign matches "k" and the long s matches "s": a lowercase
    # check on such a line would wrongly skip the rule.
    rules = RuleSet([Rule("k", re.compile(r"(?i)kind (?P<step>\d+)"))], desc_phases={})
    assert rules.match("\u212aind 4").fields == {"step": "4"}
    rules = RuleSet([Rule("s", re.compile(r"(?i)step (?P<step>\d+)"))], desc_phases={})
    assert rules.match("\u017ftep 5").fields == {"step": "5"}


"""The README's example of a log format gpuwatch does not know, added with `[[rules]]` entries, works as
written: its toml block loads as a config, and the lines it describes are read as it says."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.jobs.integration import settings_from_config
from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.observation import ExitFacts, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import infer_phase
from gpuwatch_tui.jobs.rules import RuleSet

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "### Log rules: your own format in one `[[rules]]` entry"
TRAIN = "[trainer] ep=3 it=1200/5000 nll=2.3140 eta=0:41:02 speed=812.5 samples/s"
EVAL = "[trainer] scoring 40/250"
DONE = "[trainer] all epochs done"


def readme_rules_block() -> str:
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, "the README's rules section moved or was renamed"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the rules section shows one toml block"
    return blocks[0]


def text_mentions_every_line() -> bool:
    text = README.read_text(encoding="utf-8")
    return all(f"`{line}`" in text for line in (TRAIN, EVAL, DONE))


def readme_ruleset() -> RuleSet:
    config = parse_config(tomllib.loads(readme_rules_block()), "README.md")
    return RuleSet.with_user_rules(settings_from_config(config).rules)


def test_the_readme_lines_are_a_format_the_builtin_rules_do_not_read():
    builtin = RuleSet.with_user_rules()
    assert builtin.match(TRAIN).progress.get("step") is None
    assert builtin.match(TRAIN).progress.get("loss") is None
    assert builtin.match(EVAL).phase is None
    assert not builtin.match(DONE).events


def test_the_readme_rules_read_progress_evaluation_and_the_finish():
    rules = readme_ruleset()
    assert text_mentions_every_line()
    interp = LogInterpreter(rules)
    interp.feed_line(TRAIN, 100.0)
    p = interp.progress.current
    assert (p.step, p.total, p.epoch, p.loss) == (1200, 5000, 3, pytest.approx(2.314))
    assert (p.rate, p.unit, p.eta_s) == (pytest.approx(812.5), "samples/s", 41 * 60 + 2)
    assert interp.hint.phase == "training" and interp.hint.rule == "my-trainer"
    interp.feed_line(EVAL, 101.0)
    assert interp.hint.phase == "evaluating"
    assert interp.progress.current.step == 1200  # evaluation batches are not training steps
    interp.feed_line(DONE, 102.0)
    assert interp.finished_text == DONE


def test_a_job_that_exits_after_the_readme_finish_line_is_finished_with_it_as_evidence():
    interp = LogInterpreter(readme_ruleset())
    for i, line in enumerate((TRAIN, EVAL, DONE)):
        interp.feed_line(line, 100.0 + i)
    samples = [ResourceSample(time=t, cpu_s=t - 90.0, children_cpu_s=0.0, gpus=(), states=("R",)) for t in (95.0, 102.0)]
    log = LogFacts(path="/run/train.log", total_bytes=200, last_growth_at=102.0, hint=interp.hint,
                   failure=interp.failure, failures=len(interp.failures), finished_at=interp.finished_at,
                   progress=interp.progress.current, last_progress_at=interp.last_progress_at, observed=True,
                   size=200, mtime=102.0, finished_text=interp.finished_text, finished_seq=interp.finished_seq)
    obs = JobObservation(samples=samples, started_at=90.0, log=log, exit=ExitFacts(103.0), has_gpus=False)
    verdict = infer_phase(obs, 104.0)
    assert verdict.phase == "finished"
    assert f"log: {DONE}" in verdict.evidence


def test_a_readme_rule_with_a_typo_is_refused_naming_the_rule():
    broken = readme_rules_block().replace('phase = "evaluating"', 'phase = "evaluate"')
    with pytest.raises(ConfigError) as err:
        parse_config(tomllib.loads(broken), "README.md")
    assert "rules[1].phase" in str(err.value)

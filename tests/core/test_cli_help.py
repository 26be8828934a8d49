"""`gpuwatch --help` lists every verb with one line of help, and every verb's own --help says what
it does and lists the exit codes (run as a person runs it: the real command, in a subprocess)."""

from __future__ import annotations

import re
import subprocess

import pytest

from gpuwatch_tui.actions.registry import cli_verbs
from gpuwatch_tui.cli import build_parser

from .test_cli_e2e import cli_env, gpuwatch

VERBS = ["status", "watch", "kill", "restart", "dump", "reap", "scancel", "doctor", "report", "record", "replay", "demo", "export"]


def run_help(tmp_path, *args) -> str:
    env = {**cli_env(tmp_path), "COLUMNS": "200"}  # one help line per verb, however long
    r = subprocess.run(gpuwatch(*args, "--help"), capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_parser_has_exactly_the_documented_verbs():
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    assert list(sub.choices) == VERBS
    assert set(cli_verbs()) <= set(VERBS)  # the action registry's verbs are among them


def test_top_level_help_lists_every_verb_with_one_line(tmp_path):
    text = run_help(tmp_path)
    assert "{" + ",".join(VERBS) + "}" in " ".join(text.split())  # the usage line names them all
    for verb in VERBS:
        line = re.search(rf"^    {verb} +(\S.*)$", text, re.M)
        assert line is not None, f"{verb} missing from gpuwatch --help:\n{text}"
        assert len(line.group(1)) > 15 and "selected" not in line.group(1), line.group(0)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_help_has_a_description_and_the_exit_codes(tmp_path, verb):
    text = run_help(tmp_path, verb)
    assert text.startswith(f"usage: gpuwatch {verb}")
    # argparse prints the description between the usage block and the first option section.
    description = text.split("\n\n")[1]
    assert not description.startswith(("options:", "positional arguments:")), text
    assert len(description.split()) >= 8, description
    assert "exit codes:" in text and "130  interrupted" in text

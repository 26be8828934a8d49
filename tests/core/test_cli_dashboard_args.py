"""The dashboard's fast argument path (cli.dashboard_args) must give exactly what the full parser
gives, and hand everything else to it."""

from __future__ import annotations

import itertools

import pytest

from gpuwatch_tui.cli import build_parser, dashboard_args

TOKENS = ["--config", "--config=a.toml", "--config=", "b.toml", "", "--theme", "--theme=gpuwatch-light",
          "gpuwatch-dark", "--readonly", "--readonly=1", "-x", "--", "status", "--conf", "-h", "--help", "-V"]


def full_parse(argv: list[str]):
    try:
        return build_parser().parse_args(argv)
    except SystemExit:
        return "exit"


@pytest.mark.parametrize("argv", [
    [], ["--readonly"], ["--config", "h.toml"], ["--config=h.toml", "--theme", "gpuwatch-light", "--readonly"],
    ["--theme=x", "--config", "a", "--config", "b"], ["--config", ""], ["--config=-weird.toml"],
])
def test_dashboard_starts_parse_as_the_full_parser_does(argv):
    fast = dashboard_args(argv)
    assert fast is not None
    assert vars(fast) == vars(full_parse(argv))


@pytest.mark.parametrize("argv", [
    ["status"], ["--config", "h.toml", "status", "--json"], ["--conf", "h.toml"], ["--read"], ["-h"], ["--help"],
    ["-V"], ["--config"], ["--config", "-x"], ["--readonly=1"], ["--"], ["kill", "h", "j"], ["h.toml"],
])
def test_anything_else_goes_to_the_full_parser(argv):
    assert dashboard_args(argv) is None


def test_every_short_combination_agrees_with_the_full_parser():
    # Where the fast path answers, its answer is the full parser's; where the full parser refuses,
    # the fast path never answers (the user gets argparse's message).
    for n in range(4):
        for argv in itertools.product(TOKENS, repeat=n):
            argv = list(argv)
            fast = dashboard_args(argv)
            if fast is not None:
                full = full_parse(argv)
                assert full != "exit" and vars(fast) == vars(full), argv

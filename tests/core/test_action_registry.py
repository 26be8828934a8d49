"""The action registry (no Textual) and how `gpuwatch status` offers advised actions: as CLI verbs."""

from __future__ import annotations

import shlex

import pytest

from gpuwatch_tui.actions.registry import ACTIONS, ActionSpec, allowed, by_key, by_name, cli_hint, cli_verbs, key_hint
from gpuwatch_tui.status_table import render_status


def test_names_and_keys_are_unique():
    assert len({a.name for a in ACTIONS}) == len({a.key for a in ACTIONS}) == len(ACTIONS)


def test_job_actions_as_specified():
    kill, restart, dump, dismiss = (by_name(n) for n in ("kill", "restart_unbuffered", "dump_stack", "dismiss"))
    assert (kill.key, kill.confirm, kill.readonly_safe, kill.cli_verb) == ("K", True, False, "kill")  # k moves up (j/k, as in nvitop)
    assert (restart.key, restart.confirm, restart.readonly_safe, restart.cli_verb) == ("u", True, False, "restart")
    assert (dump.key, dump.confirm, dump.readonly_safe, dump.cli_verb) == ("d", True, False, "dump")
    assert (dismiss.key, dismiss.confirm, dismiss.readonly_safe, dismiss.cli_verb) == ("x", False, True, None)
    assert {a.scope for a in (kill, restart, dump, dismiss)} == {"job"}
    # The incident report reads what gpuwatch holds and writes a local file: no confirm, kept in
    # --readonly; `gpuwatch report` is a verb of its own, not one the action service runs.
    report = by_name("report")
    assert (report.key, report.confirm, report.readonly_safe, report.cli_verb, report.scope) == (
        "e", False, True, None, "job")
    assert [by_key(k).name for k in "q?pt"] == ["quit", "help", "pause", "theme"]
    assert by_key("z") is None


def test_readonly_allows_only_what_changes_nothing_on_a_host():
    assert allowed(False) == ACTIONS
    assert [a.name for a in allowed(True)] == ["quit", "help", "pause", "theme", "report", "bundle", "dismiss"]


def test_cli_verbs_for_the_cli():
    assert {verb: spec.name for verb, spec in cli_verbs().items()} == {
        "kill": "kill", "restart": "restart_unbuffered", "dump": "dump_stack", "reap": "reap"}


def test_unknown_names_and_scopes_are_clear_errors():
    with pytest.raises(KeyError, match="no action named 'reboot'.*kill"):
        by_name("reboot")
    with pytest.raises(ValueError, match="scope must be one of job, app"):
        ActionSpec("x", "x", "X", "", confirm=False, readonly_safe=True, cli_verb=None, scope="host")


def test_hints():
    assert key_hint("restart_unbuffered") == "u: restart with -u"
    assert key_hint("dump_stack") == "d: py-spy dump"
    assert cli_hint("dismiss", "h", "j") is None
    # Names come from config and remote cmdlines: the printed command is safe to paste.
    hint = cli_hint("kill", "gpu-1", "train.py; rm -rf ~")
    assert hint == "gpuwatch kill gpu-1 'train.py; rm -rf ~'"
    assert shlex.split(hint) == ["gpuwatch", "kill", "gpu-1", "train.py; rm -rf ~"]


def snapshot_with_job(**job) -> dict:
    base = {"host": "trainer-e", "name": "sft-nohup", "pids": [51877], "phase": "silent", "detail": "buffered-stdout",
            "since": 900.0, "progress": {}, "evidence": ["log empty after 6m40s"]}
    return {"time": 1000.0, "hosts": [], "jobs": [{**base, **job}]}


def test_status_table_prints_cli_verbs_not_keys():
    text = render_status(snapshot_with_job(
        advice="output is sitting in the process's stdout buffer: restart it with -u to see it",
        actions=["restart_unbuffered", "dump_stack"]))
    lines = text.splitlines()
    advice_at = lines.index("  trainer-e/sft-nohup: output is sitting in the process's stdout buffer: "
                            "restart it with -u to see it")
    assert lines[advice_at + 1:advice_at + 3] == ["    gpuwatch restart trainer-e sft-nohup",
                                                  "    gpuwatch dump trainer-e sft-nohup"]
    assert "press" not in text and "u:" not in text
    assert "1m40s" in text  # SINCE, written by the one duration formatter


def test_status_table_without_actions_or_with_a_dashboard_only_one():
    text = render_status(snapshot_with_job(phase="crashed", advice="read the end of the log", actions=["dismiss"]))
    assert "gpuwatch " not in text and "read the end of the log" in text
    assert "gpuwatch " not in render_status(snapshot_with_job(advice="wait"))  # older JSON: no "actions" key


def test_the_engines_action_names_are_the_registrys():
    """The phase engine and the job records name actions by these constants (jobs/phase.py): each is a
    registered action, so a verdict's advice always maps to a key and a CLI verb."""
    from gpuwatch_tui.jobs import ended_by, phase

    for name in (phase.KILL, phase.RESTART, phase.DUMP, phase.DISMISS, *ended_by.KILLING_ACTIONS):
        assert by_name(name).name == name


def test_the_words_an_action_shows_come_from_the_registry():
    from gpuwatch_tui.actions.registry import running_words

    assert running_words("kill") == "killing…" and running_words("dump_stack") == "dumping…"
    assert running_words("scancel") == "scancel"  # not a registered action: its own name
    assert [a.confirm_label for a in ACTIONS if a.confirm] == ["Kill", "Restart", "Dump", "Reap"]

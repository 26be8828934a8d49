"""Which commands the client runs, and how it reads their answers, where the test cluster cannot show it:
accounting present (sacct answers: the test Slurm has no slurmdbd), `sacct = false`, a login node that
cannot be reached, and the JSON form falling back to text. The runner answers from a script of
recorded outputs (version_fixtures.py) and records every argv."""

from __future__ import annotations

import asyncio

from gpuwatch_tui.slurm.client import SlurmClient
from gpuwatch_tui.slurm.runner import CommandResult, CommandRunner
from gpuwatch_tui.slurm.settings import SlurmConfig
from gpuwatch_tui.slurm.watch import SlurmWatch

from . import version_fixtures as fx


class ScriptedRunner(CommandRunner):
    where = "login1"

    def __init__(self, answers):
        self.answers = answers  # command name -> CommandResult-ish (rc, stdout, stderr, error)
        self.calls: list[list[str]] = []

    async def run(self, argv, timeout=30.0):
        self.calls.append(list(argv))
        rc, out, err, error = self.answers.get(argv[0], (127, "", f"{argv[0]}: not found", None))
        if callable(out):
            out = out(argv)
        return CommandResult(tuple(argv), rc, out, err, error)


def test_sacct_answers_final_states():
    runner = ScriptedRunner({"sacct": (0, fx.SACCT_23_11, "", None)})
    client = SlurmClient(runner, SlurmConfig(user="alice"))
    jobs, problems = asyncio.run(client.final_states(["4090", "4105"]))
    assert problems == [] and client.accounting is True
    assert {j.job_id: (j.state, j.exit_code) for j in jobs} == {"4090": ("FAILED", 3), "4100_3": ("OUT_OF_MEMORY", 0)}
    (argv,) = runner.calls
    assert argv[0] == "sacct" and "--jobs=4090,4105" in argv and "--allocations" in argv
    assert not any(a[0] == "scontrol" for a in runner.calls)


def test_sacct_off_asks_scontrol_only():
    runner = ScriptedRunner({"scontrol": (0, fx.SCONTROL_24_05, "", None)})
    client = SlurmClient(runner, SlurmConfig(user="bob", sacct=False))
    jobs, _ = asyncio.run(client.final_states(["9003"]))
    assert [c[0] for c in runner.calls] == ["scontrol"]
    assert jobs[0].state == "TIMEOUT" and jobs[0].stdout == "/u/bob/long-9003-dgx-a007.out"


def test_a_failed_read_keeps_the_last_queue_and_says_why():
    answers = {"squeue": (0, fx.SQUEUE_TEXT_23_11, "", None), "sacct": (0, "", "", None)}
    runner = ScriptedRunner(answers)
    watch = SlurmWatch(SlurmClient(runner, SlurmConfig(user="alice")))
    asyncio.run(watch.poll())
    assert len(watch.queue) == 4
    answers["squeue"] = (None, "", "", "login node login1: timed out after 10s")
    read = asyncio.run(watch.poll())
    assert read.error and "timed out" in read.error
    assert len(watch.queue) == 4 and watch.to_json()["error"] == read.error


def test_json_unreadable_falls_back_to_text():
    answers = {"squeue": (0, lambda argv: "not json" if "--json" in argv else
                          ("slurm 23.11.5\n" if "--version" in argv else fx.SQUEUE_TEXT_23_11), "", None)}
    runner = ScriptedRunner(answers)
    read = asyncio.run(SlurmClient(runner, SlurmConfig(user="alice", queue_format="json")).queue())
    assert read.source == "squeue" and len(read.jobs) == 4
    assert "squeue --json unusable" in read.problems[0]


def test_user_defaults_to_the_login_nodes_ssh_user():
    answers = {"id": (0, "carol\n", "", None), "squeue": (0, "", "", None)}
    runner = ScriptedRunner(answers)
    client = SlurmClient(runner, SlurmConfig())
    asyncio.run(client.queue())
    assert runner.calls[0] == ["id", "-un"] and "--user=carol" in runner.calls[1]
    everyone = ScriptedRunner({"squeue": (0, "", "", None)})
    asyncio.run(SlurmClient(everyone, SlurmConfig(user="*")).queue())
    assert not any(a.startswith("--user") for a in everyone.calls[0])

"""The Slurm parsers on output of other versions (version_fixtures.py) and on the hard cases."""

from __future__ import annotations

import pytest

from gpuwatch_tui.slurm.durations import format_slurm_duration, parse_slurm_duration
from gpuwatch_tui.slurm.hostlist import HostlistError, expand_hostlist
from gpuwatch_tui.slurm.log_path import expand_log_path
from gpuwatch_tui.slurm.sacct import accounting_disabled, parse_sacct
from gpuwatch_tui.slurm.scancel import scancel_argv
from gpuwatch_tui.slurm.scontrol_job import parse_pairs, parse_scontrol_jobs
from gpuwatch_tui.slurm.squeue_json import parse_squeue_json, parse_version
from gpuwatch_tui.slurm.squeue_text import SEP, parse_squeue_text

from . import version_fixtures as fx


@pytest.mark.parametrize("text, hosts", [
    ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
    ("gpu[08-11],login1", ["gpu08", "gpu09", "gpu10", "gpu11", "login1"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("node1,node1", ["node1"]),
    ("dgx-a[003,005]", ["dgx-a003", "dgx-a005"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("", []), ("(null)", []), ("None assigned", []),
])
def test_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["gpu[01-03", "gpu]01[", "gpu[a-b]", "gpu[5-1]", "n[1-99999999]", "n[[1]]"])
def test_hostlist_errors_name_the_problem(bad):
    with pytest.raises(HostlistError, match="hostlist"):
        expand_hostlist(bad)


@pytest.mark.parametrize("text, seconds", [
    ("0:00", 0), ("12:34", 754), ("1:00:00", 3600), ("2-00:00:00", 172800), ("1-02:03:04", 93784),
    ("UNLIMITED", None), ("N/A", None), ("INVALID", None), ("10", 600),
])
def test_durations(text, seconds):
    assert parse_slurm_duration(text) == seconds
    if seconds is not None and text != "10":
        assert parse_slurm_duration(format_slurm_duration(seconds)) == seconds


def test_log_path_patterns():
    common = dict(job_id="4102", node="gpu07", user="alice", name="sweep", work_dir="/home/alice")
    assert expand_log_path("%x-%j-%N-%u.out", **common) == "/home/alice/sweep-4102-gpu07-alice.out"
    assert expand_log_path("/s/%A_%a.log", array_job_id="4100", array_task_id="7", **common) == "/s/4100_7.log"
    # Outside an array %A is the job id and %a is what slurmstepd writes for "no task".
    assert expand_log_path("/s/%A_%a.log", **common) == "/s/4102_4294967294.log"
    assert expand_log_path("/s/100%%-%5j.log", **common) == "/s/100%-04102.log"
    assert expand_log_path("/already/filled.out", **common) == "/already/filled.out"
    # Unknown node (pending): %N stays, so nobody tails a wrong file.
    assert expand_log_path("/s/%N.log", job_id="1") == "/s/%N.log"


def test_squeue_text_23_11():
    read = parse_squeue_text(fx.SQUEUE_TEXT_23_11)
    assert read.problems == []
    big, task, pending, odd = read.jobs
    assert big.job_id == "4101" and big.name == "llama 70b | sft" and big.state == "RUNNING" and big.reason is None
    assert big.nodes == ("gpu01", "gpu02", "gpu03", "gpu04") and big.nodelist == "gpu[01-04]"
    assert big.elapsed_s == 93784 and big.time_limit_s == 172800
    assert big.stdout == "/home/alice/runs/logs/llama 70b | sft-4101-gpu01.out"
    assert big.stderr == "/home/alice/runs/logs/llama 70b | sft-4101-gpu01.err"
    assert task.job_id == "4100_7" and task.raw_id == "4102" and task.array_job_id == "4100"
    assert task.stdout == "/scratch/alice/4100_7.log" and task.stderr is None
    assert pending.is_pending and pending.reason == "QOSMaxGRESPerUser" and pending.nodes == ()
    assert pending.stdout == "/home/alice/slurm-4103.out" and pending.time_limit_s == 1800
    assert odd.time_limit_s is None and odd.name == "100%done" and odd.stdout == "/home/alice/100%done_%.out"


def test_squeue_text_24_05_expanded_paths_pass_unchanged():
    read = parse_squeue_text(fx.SQUEUE_TEXT_24_05)
    train, prep = read.jobs
    assert train.nodes == ("dgx-a003", "dgx-a005") and train.stdout == "/u/bob/logs/train-9001-dgx-a003.out"
    assert prep.state == "COMPLETING" and prep.is_active


def test_squeue_text_reports_a_broken_line_instead_of_guessing():
    text = fx.SQUEUE_TEXT_24_05 + "9005" + SEP + "name with" + "\n" + "a newline" + SEP + "\n"
    read = parse_squeue_text(text)
    assert len(read.jobs) == 2
    assert len(read.problems) == 2 and "expected 17" in read.problems[0]


def test_squeue_json_23_11():
    jobs = parse_squeue_json(fx.SQUEUE_JSON_23_11, now=1714557720 + 3600)
    big, task, pending = jobs
    assert big.job_id == "4101" and big.state == "RUNNING" and big.reason is None
    assert big.elapsed_s == 3600 and big.time_limit_s == 2880 * 60
    assert big.stdout == "/home/alice/runs/logs/llama 70b | sft-4101-gpu01.out"
    assert task.job_id == "4100_7" and task.raw_id == "4102" and task.stdout == "/scratch/alice/4100_7.log"
    assert pending.is_pending and pending.reason == "QOSMaxGRESPerUser" and pending.time_limit_s is None
    assert big.exit_code is None  # a running job has no exit code yet


def test_squeue_json_24_05_uses_the_expanded_paths_and_signals():
    train, long = parse_squeue_json(fx.SQUEUE_JSON_24_05, now=1725177605 + 60)
    assert train.stdout == "/u/bob/logs/train-9001-dgx-a003.out" and train.nodes == ("dgx-a003", "dgx-a005")
    assert train.time_limit_s == 720 * 60 and train.elapsed_s == 60
    assert long.state == "TIMEOUT" and long.is_ended and long.exit_signal == 9 and long.exit_code == 0


def test_squeue_json_errors_are_errors():
    with pytest.raises(ValueError, match="Invalid user"):
        parse_squeue_json('{"jobs": [], "errors": [{"description": "Invalid user: x", "error_number": 2}]}')
    with pytest.raises(ValueError, match="no `jobs`"):
        parse_squeue_json('{"meta": {}}')


def test_sacct_23_11():
    jobs, problems = parse_sacct(fx.SACCT_23_11)
    assert problems == []
    failed, cancelled, oom, never = jobs
    assert failed.name == "fails | badly" and failed.state == "FAILED" and failed.exit_code == 3
    assert failed.exit_signal is None and failed.elapsed_s == 7 and failed.nodes == ("gpu02",)
    assert cancelled.base_state == "CANCELLED" and cancelled.is_ended and cancelled.exit_signal == 15
    assert cancelled.nodes == ("gpu03", "gpu04") and cancelled.time_limit_s == 172800
    assert oom.job_id == "4100_3" and oom.raw_id == "4105" and oom.array_task_id == "3"
    assert never.nodes == () and never.start_time is None
    assert accounting_disabled("sacct: error: Slurm accounting storage is disabled")


def test_scontrol_24_05_paths_already_expanded():
    (job,) = parse_scontrol_jobs(fx.SCONTROL_24_05)
    assert job.state == "TIMEOUT" and job.reason == "TimeLimit" and job.exit_signal == 15
    assert job.nodes == ("dgx-a007", "dgx-a008") and job.user == "bob"
    assert job.stdout == "/u/bob/long-9003-dgx-a007.out" and job.elapsed_s == 3602 and job.time_limit_s == 3600


def test_scontrol_values_with_spaces():
    pairs = parse_pairs("JobId=1 JobName=exit three | x UserId=root(0) StdOut=/tmp/a b/%N.out Power=")
    assert pairs["JobName"] == "exit three | x" and pairs["StdOut"] == "/tmp/a b/%N.out" and pairs["Power"] == ""


def test_versions():
    assert parse_version("slurm 24.05.3") == (24, 5)
    assert parse_version("slurm-wlm 22.05.8") == (22, 5)


@pytest.mark.parametrize("args, argv", [
    (("12",), ["scancel", "--", "12"]),
    (("12_3", "term", True), ["scancel", "--signal=TERM", "--full", "--", "12_3"]),
    (("12", "SIGUSR1", False, True), ["scancel", "--signal=USR1", "--batch", "--", "12"]),
    (("12", 10), ["scancel", "--signal=10", "--", "12"]),
])
def test_scancel_argv(args, argv):
    assert scancel_argv(*args) == argv


@pytest.mark.parametrize("args, words", [
    (("12; rm -rf ~",), "not a Slurm job id"), (("-1",), "not a Slurm job id"),
    (("12", "BOGUS"), "unknown signal"), (("12", None, True, True), "not both"),
])
def test_scancel_argv_refuses(args, words):
    with pytest.raises(ValueError, match=words):
        scancel_argv(*args)


def test_display_cells():
    from gpuwatch_tui.slurm.display import queue_row
    from gpuwatch_tui.slurm.records import SlurmJob

    near = SlurmJob("5", "t", "u", "RUNNING", nodes=("a", "b"), nodelist="n[1-2]", elapsed_s=3300, time_limit_s=3600)
    assert queue_row(near).cells[3:5] == ("n[1-2] (2 nodes)", "55:00/1:00:00 (5:00 left)")
    waiting = SlurmJob("6", "t", "u", "PENDING", reason="Priority", elapsed_s=0, time_limit_s=None)
    assert queue_row(waiting).cells[3:6] == ("(Priority)", "0:00/UNLIMITED", "-")
    killed = SlurmJob("7", "t", "u", "CANCELLED by 0", exit_code=0, exit_signal=9)
    assert queue_row(killed).cells[5] == "sig 9" and queue_row(killed).state_variable == "phase-stalled"


def test_array_lines_as_squeue_22_05_prints_them():
    """Recorded from the test Slurm (22.05): `--array=1-6%2`, task 1 running, the rest pending as one line,
    both with squeue's default path slurm-<id>.out, which for an array task is not the file it writes."""
    text = (fx.line("1", "1_[2-6%2]", "1", "2-6%2", "arr", "root", "PENDING", "Resources", "", "0:00",
                    "UNLIMITED", "debug", "/j", "2026-12-01T06:09:39", "N/A", "/j/slurm-1.out", "/j/slurm-1.out")
            + "\n" + fx.line("2", "1_1", "1", "1", "arr", "root", "RUNNING", "None", "gwnode1", "0:01", "UNLIMITED",
                             "debug", "/j", "2026-12-01T06:09:39", "2026-12-01T06:09:41", "/j/slurm-2.out",
                             "/j/slurm-2.out") + "\n")
    rest, task = parse_squeue_text(text).jobs
    assert rest.job_id == "1_[2-6%2]" and rest.is_pending and rest.stdout == "/j/slurm-1_%a.out"
    assert task.job_id == "1_1" and task.raw_id == "2" and task.stdout == "/j/slurm-1_1.out"
    assert scancel_argv(rest.job_id) == ["scancel", "--", "1_[2-6]"]


def test_node_host_names_fill_percent_n():
    read = parse_squeue_text(fx.SQUEUE_TEXT_23_11, node_host={"gpu01": "gpu01.cluster"}.get)
    assert read.jobs[0].stdout == "/home/alice/runs/logs/llama 70b | sft-4101-gpu01.cluster.out"
    from gpuwatch_tui.slurm.scontrol_job import parse_node_hosts

    assert parse_node_hosts("NodeName=gwnode1 Arch=x86_64 CoresPerSocket=1 NodeAddr=127.0.0.1 NodeHostName=vm "
                            "Version=22.05.8\nNodeName=n2 NodeAddr=n2 NodeHostName=n2\n") == {"gwnode1": "vm", "n2": "n2"}

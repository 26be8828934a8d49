"""A real buffered job restarted with -u: same cwd and environment, output now streams into the same log,
the old content kept after a marker line, and the wrapper's record gives the real exit status."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time

from gpuwatch_tui.actions.job_tree import JobTree
from gpuwatch_tui.actions.restart import build_restart, restart_job
from gpuwatch_tui.actions.settings import ActionSettings

from .conftest import HOST_PYTHON, SCRIPTS, alive, local_request, ops_spawn, proc_info, ticks, wait_for


def _environ(pid: int) -> dict[str, str]:
    raw = open(f"/proc/{pid}/environ", "rb").read().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def _start_buffered(started, tmp_path):
    """Like `nohup python3 job.py > train.log 2>&1 &` from the job's own directory."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    log = workdir / "train.log"
    with open(log, "wb") as out:
        job = started.popen([HOST_PYTHON, str(SCRIPTS / "buffered_job.py")], cwd=workdir, stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                            env={"PATH": "/usr/bin:/bin", "GW_TEST_TOKEN": "tok-42"})
    wait_for(lambda: b"hello from" in log.read_bytes(), what="the job's first (stderr) line")
    return job, workdir, log


def test_buffered_job_restarted_unbuffered_streams_into_the_same_log(started, tmp_path):
    job, workdir, log = _start_buffered(started, tmp_path)
    time.sleep(1.0)
    assert b"step" not in log.read_bytes()  # really buffered: ~10 steps printed, none in the log yet
    status_dir = tmp_path / "state"

    captured = ops_spawn.op_capture({"pid": job.pid, "start_ticks": ticks(job.pid)})
    assert captured["environ"]["GW_TEST_TOKEN"] == "tok-42" and captured["stdout"]["kind"] == "file"
    plan = build_restart(captured, host="gpu-1", job="buffered_job.py", local_user="alice",
                         kill_tree=JobTree("gpu-1", "buffered_job.py", (proc_info(job.pid),)))
    assert plan.argv[:2] == (HOST_PYTHON, "-u") and plan.stderr == "stdout"

    async def old_job_holds_gpu() -> bool:  # the old process stands in for its GPU memory
        return job.poll() is None

    marker_at_kill = []  # whether the log held the marker when the old job was first signalled

    async def request(op: str, args: dict, timeout: float) -> dict:
        if op in ("kill_tree", "signal") and not marker_at_kill:
            marker_at_kill.append(b"=== gpuwatch: restarted with -u" in log.read_bytes())
        return await local_request(op, args, timeout)

    report = asyncio.run(restart_job(request, plan, old_job_holds_gpu, settings=ActionSettings(kill_grace_s=3),
                                     status_dir=str(status_dir)))
    assert report.spawned, report.summary()
    started.track(report.pid)
    started.track(report.wrapper_pid)
    assert marker_at_kill == [True]  # a watching gpuwatch reads it no later than it sees the old run end
    assert report.kill.ok and report.gpu_released is True
    assert job.wait(timeout=5) == -signal.SIGTERM

    new = report.pid
    cmdline = open(f"/proc/{new}/cmdline", "rb").read().split(b"\0")[:-1]
    assert cmdline[:2] == [HOST_PYTHON.encode(), b"-u"]
    assert os.readlink(f"/proc/{new}/cwd") == str(workdir)
    env = _environ(new)
    assert env["GW_TEST_TOKEN"] == "tok-42" and env["PYTHONUNBUFFERED"] == "1" and env["PATH"] == "/usr/bin:/bin"
    assert os.getsid(new) != os.getsid(0)  # detached: its own session
    assert os.readlink(f"/proc/{new}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{new}/fd/1") == str(log)
    # Output streams while the job runs.
    wait_for(lambda: log.read_bytes().count(b"step") >= 3, timeout=10, what="unbuffered steps in the log")
    text = log.read_text()
    first, marker, rest = text.partition("=== gpuwatch: restarted with -u at ")
    assert marker and f"hello from pid {job.pid} token=tok-42" in first  # old content kept, before the marker
    assert f"by alice (was pid {job.pid}) ===\n" in rest and f"hello from pid {new} token=tok-42" in rest
    assert text.count("=== gpuwatch: restarted") == 1  # written once, before the kill
    assert f"step 0 cwd={workdir} token=tok-42" in rest

    record = ops_spawn.op_run_status({"status_file": report.status_file})
    assert record["running"] is True and record["pid"] == new
    (workdir / "stop").touch()
    record = wait_for(lambda: (r := ops_spawn.op_run_status({"status_file": report.status_file})) and
                      not r["running"] and r, what="the wrapper's exit record")
    assert record["exit_code"] == 3 and record["exit_signal"] is None and record["ended_at"]
    assert "stopping after" in log.read_text()


def test_wrapper_records_the_signal_that_killed_the_job(started, tmp_path):
    reply = ops_spawn.op_spawn({"argv": [HOST_PYTHON, "-c", "import time; time.sleep(60)"], "cwd": str(tmp_path),
                                "env": {"PATH": "/usr/bin:/bin"}, "stdout": str(tmp_path / "out.log"),
                                "status_dir": str(tmp_path / "state")})
    started.track(reply["pid"])
    started.track(reply["wrapper_pid"])
    assert reply["start_ticks"] == ticks(reply["pid"]) and reply["wrapper_start_ticks"] == ticks(reply["wrapper_pid"])
    assert open(f"/proc/{reply['wrapper_pid']}/comm").read().strip() == ops_spawn.WRAPPER_NAME
    os.kill(reply["pid"], signal.SIGKILL)
    record = wait_for(lambda: (r := ops_spawn.op_run_status({"status_file": reply["status_file"]})) and
                      not r["running"] and r, what="the wrapper's exit record")
    assert record["exit_signal"] == signal.SIGKILL and record["exit_signal_name"] == "SIGKILL"
    assert record["exit_code"] is None
    wait_for(lambda: not alive(reply["wrapper_pid"], reply["wrapper_start_ticks"]), what="the wrapper to end")


def test_sigterm_to_the_wrapper_reaches_the_job_and_is_recorded(started, tmp_path):
    reply = ops_spawn.op_spawn({"argv": ["sleep", "60"], "cwd": str(tmp_path), "env": {"PATH": "/usr/bin:/bin"},
                                "status_dir": str(tmp_path / "state")})
    started.track(reply["pid"])
    started.track(reply["wrapper_pid"])
    assert reply["stdout"].startswith(str(tmp_path / "state"))  # no log given: a new one in the state dir
    os.kill(reply["wrapper_pid"], signal.SIGTERM)
    record = wait_for(lambda: (r := ops_spawn.op_run_status({"status_file": reply["status_file"]})) and
                      not r["running"] and r, what="the wrapper's exit record")
    assert record["exit_signal_name"] == "SIGTERM"


def test_rotate_keeps_the_old_log_as_dot_1(started, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("old run line\n")
    (tmp_path / "train.log.1").write_text("older run\n")
    reply = ops_spawn.op_spawn({"argv": [HOST_PYTHON, "-u", "-c", "print('new run line')"], "cwd": str(tmp_path),
                                "env": {}, "stdout": str(log), "log_mode": "rotate", "marker": "=== restarted ===",
                                "status_dir": str(tmp_path / "state")})
    started.track(reply["pid"])
    wait_for(lambda: not ops_spawn.op_run_status({"status_file": reply["status_file"]})["running"], what="exit")
    assert (tmp_path / "train.log.1").read_text() == "old run line\n"
    assert (tmp_path / "train.log.2").read_text() == "older run\n"
    assert log.read_text() == "=== restarted ===\nnew run line\n"
    assert reply["rotated_to"] == [str(tmp_path / "train.log.1")]


def test_spawn_refuses_bad_requests_clearly(tmp_path):
    import pytest

    from .conftest import ops_base

    cases = [
        ({"argv": [], "cwd": str(tmp_path), "env": {}}, "bad-args", "argv"),
        ({"argv": ["true"], "cwd": str(tmp_path / "nope"), "env": {}}, "bad-args", "not a directory"),
        ({"argv": ["true"], "cwd": str(tmp_path), "env": {"A=B": "x"}}, "bad-args", "env"),
        ({"argv": ["true"], "cwd": str(tmp_path), "env": {}, "log_mode": "truncate"}, "bad-args", "log_mode"),
        ({"argv": ["true"], "cwd": str(tmp_path), "env": {}, "uid": 65534}, "wrong-user", "nobody"),
        ({"argv": ["/no/such/program"], "cwd": str(tmp_path), "env": {}, "status_dir": str(tmp_path / "s")},
         "spawn", "could not start /no/such/program"),
    ]
    for args, code, words in cases:
        with pytest.raises(ops_base.OpError) as err:
            ops_spawn.op_spawn(args)
        assert err.value.code == code and words in err.value.message, (args, err.value.message)


def test_a_log_note_goes_on_a_line_of_its_own_and_refuses_bad_requests(tmp_path):
    import pytest

    from .conftest import ops_base

    log = tmp_path / "train.log"
    log.write_bytes(b"step 1\npartial")  # the old run's last write did not end its line
    assert ops_spawn.op_log_note({"path": str(log), "line": "=== restarted ==="}) == {"path": str(log)}
    assert log.read_bytes() == b"step 1\npartial\n=== restarted ===\n"
    cases = [({"path": "train.log", "line": "x"}, "bad-args", "absolute"),
             ({"path": str(log), "line": " "}, "bad-args", "line"),
             ({"path": str(log), "line": "x", "uid": 65534}, "wrong-user", "nobody"),
             ({"path": str(tmp_path / "no" / "dir.log"), "line": "x"}, "log", "cannot write")]
    for args, code, words in cases:
        with pytest.raises(ops_base.OpError) as err:
            ops_spawn.op_log_note(args)
        assert err.value.code == code and words in err.value.message, (args, err.value.message)
    assert log.read_bytes() == b"step 1\npartial\n=== restarted ===\n"  # nothing written by a refused note


def test_a_separate_stderr_log_gets_the_marker_before_the_kill_too(started, tmp_path):
    """stdout and stderr to two files: both hold the marker when the old job is first signalled, once each."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    out_log, err_log = workdir / "out.log", workdir / "err.log"
    with open(out_log, "wb") as out, open(err_log, "wb") as err:
        job = started.popen([HOST_PYTHON, str(SCRIPTS / "buffered_job.py")], cwd=workdir, stdout=out, stderr=err,
                            stdin=subprocess.DEVNULL, start_new_session=True, env={"PATH": "/usr/bin:/bin"})
    wait_for(lambda: b"hello from" in err_log.read_bytes(), what="the job's first (stderr) line")
    captured = ops_spawn.op_capture({"pid": job.pid, "start_ticks": ticks(job.pid)})
    plan = build_restart(captured, host="gpu-1", job="buffered_job.py", local_user="alice",
                         kill_tree=JobTree("gpu-1", "buffered_job.py", (proc_info(job.pid),)))
    assert plan.stderr == str(err_log)
    marked_at_kill = []

    async def request(op: str, args: dict, timeout: float) -> dict:
        if op in ("kill_tree", "signal") and not marked_at_kill:
            marked_at_kill.append([b"=== gpuwatch: restarted" in p.read_bytes() for p in (out_log, err_log)])
        return await local_request(op, args, timeout)

    report = asyncio.run(restart_job(request, plan, settings=ActionSettings(kill_grace_s=3),
                                     status_dir=str(tmp_path / "state")))
    assert report.spawned, report.summary()
    started.track(report.pid)
    started.track(report.wrapper_pid)
    assert marked_at_kill == [[True, True]]
    assert [p.read_text().count("=== gpuwatch: restarted") for p in (out_log, err_log)] == [1, 1]

"""build_restart is pure: the planned command line, environment, outputs and warnings."""

from __future__ import annotations

import pytest

from gpuwatch_tui.actions.restart import build_restart, has_unbuffered_flag, is_python_interpreter, unbuffered_argv


def _captured(**over):
    base = {"pid": 1234, "start_ticks": 5678, "argv": ["python3", "train.py", "--lr", "3e-4"], "cwd": "/home/alice/run",
            "environ": {"PATH": "/usr/bin", "HF_HOME": "/data/hf"}, "environ_readable": True,
            "environ_note": "exec-time", "uid": 1000, "user": "alice",
            "stdout": {"path": "/home/alice/run/train.log", "kind": "file", "append": False},
            "stderr": {"path": "/home/alice/run/train.log", "kind": "file", "append": False}}
    base.update(over)
    return base


@pytest.mark.parametrize("arg0, yes", [("python", True), ("python3", True), ("python3.12", True),
                                       ("/opt/conda/bin/python", True), ("/usr/bin/python3.11", True),
                                       ("torchrun", False), ("train.py", False), ("python-config", False)])
def test_interpreters_are_recognised(arg0, yes):
    assert is_python_interpreter(arg0) is yes


@pytest.mark.parametrize("argv, want", [
    (["python3", "train.py"], ["python3", "-u", "train.py"]),
    (["python3", "-u", "train.py"], ["python3", "-u", "train.py"]),
    (["python3", "-Wignore", "-uB", "t.py"], ["python3", "-Wignore", "-uB", "t.py"]),
    (["python3", "-m", "pkg", "-u"], ["python3", "-u", "-m", "pkg", "-u"]),  # the module's own -u is not ours
    (["python3", "t.py", "-u"], ["python3", "-u", "t.py", "-u"]),
    (["torchrun", "--nproc-per-node=2", "t.py"], ["torchrun", "--nproc-per-node=2", "t.py"]),
])
def test_minus_u_goes_right_after_the_interpreter(argv, want):
    assert unbuffered_argv(argv) == want


@pytest.mark.parametrize("argv, yes", [(["python3", "-u", "t.py"], True), (["python3", "-Bu", "t.py"], True),
                                       (["python3", "-W", "u", "t.py"], False), (["python3", "t.py", "-u"], False),
                                       (["python3", "-c", "x", "-u"], False)])
def test_minus_u_is_read_only_among_the_interpreter_options(argv, yes):
    assert has_unbuffered_flag(argv) is yes


def test_plan_keeps_cwd_env_and_log_and_marks_the_restart():
    plan = build_restart(_captured(), host="gpu-1", job="train.py", local_user="bob", now=1796094840.0)
    assert plan.argv == ("python3", "-u", "train.py", "--lr", "3e-4")
    assert plan.env == {"PATH": "/usr/bin", "HF_HOME": "/data/hf", "PYTHONUNBUFFERED": "1"}
    assert plan.cwd == "/home/alice/run" and plan.stdout == "/home/alice/run/train.log" and plan.stderr == "stdout"
    assert plan.marker == "=== gpuwatch: restarted with -u at 2026-12-01T03:14:00Z by bob (was pid 1234) ==="
    assert any("exec-time" in w for w in plan.warnings)
    args = plan.spawn_args()
    assert args["uid"] == 1000 and args["log_mode"] == "append"
    assert plan.command().startswith("cd /home/alice/run && PYTHONUNBUFFERED=1 setsid python3 -u train.py --lr 3e-4")
    assert ">> /home/alice/run/train.log 2>&1" in plan.command()


def test_unreadable_environ_falls_back_and_says_so():
    plan = build_restart(_captured(environ=None, environ_readable=False, environ_note="Permission denied"),
                         host="h", job="j", fallback_env={"PATH": "/bin"})
    assert plan.env == {"PATH": "/bin", "PYTHONUNBUFFERED": "1"}
    assert any(w.startswith("environ unreadable: restarted with gpuwatch's view") for w in plan.warnings)


def test_pipe_stdout_goes_to_a_new_log_and_launchers_get_no_minus_u():
    plan = build_restart(_captured(argv=["torchrun", "t.py"], stdout={"path": "pipe:[1]", "kind": "pipe"},
                                   stderr={"path": "/dev/pts/3", "kind": "tty"}), host="h", job="j")
    assert plan.argv == ("torchrun", "t.py") and plan.stdout is None and plan.stderr == "stdout"
    assert any("not a Python interpreter" in w for w in plan.warnings)
    assert any("new log" in w for w in plan.warnings)


def test_separate_stderr_file_is_kept():
    plan = build_restart(_captured(stderr={"path": "/home/alice/run/err.log", "kind": "file"}), host="h", job="j")
    assert plan.stderr == "/home/alice/run/err.log"


@pytest.mark.parametrize("over, words", [({"argv": []}, "command line"), ({"cwd": None}, "working directory")])
def test_unusable_captures_are_clear_errors(over, words):
    with pytest.raises(ValueError, match=words):
        build_restart(_captured(**over), host="h", job="j")

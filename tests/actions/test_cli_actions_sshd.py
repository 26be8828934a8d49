"""`gpuwatch kill|restart|dump HOST JOB` as a person or a script runs it: a real sshd host, a real job,
the CLI as a subprocess. Without a terminal and without --yes it refuses; --readonly refuses; an unknown
job lists the jobs there; --yes kills. Every attempt is in the audit log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.core.helpers import host_entry, settings_for, toml_value

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def gpuwatch(*args):
    return [sys.executable, "-m", "gpuwatch_tui.cli", *args]


def write_config(path: Path, ssh_env, host, job_match: str, **settings) -> Path:
    lines = ["[settings]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in settings_for(ssh_env, **settings).items()]
    lines += ["", "[actions]", 'kill_grace = "1s"', "", "[[hosts]]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in host_entry(host).items()]
    lines += ["", "[[jobs]]", 'name = "sleeper"', f"host = {toml_value(host.name)}", f"match = {toml_value(job_match)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def env_for(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env.pop("GPUWATCH_CONFIG", None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # the audit log goes here
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return env


def audit(tmp_path: Path) -> list[dict]:
    path = tmp_path / "state" / "gpuwatch" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def job(tmp_path):
    script = tmp_path / "sleeper_job.py"
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    p = subprocess.Popen([PY, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         start_new_session=True)
    yield p, script
    if p.poll() is None:
        p.kill()
    p.wait(5)


def run(args, tmp_path, timeout=60):
    return subprocess.run(gpuwatch(*args), capture_output=True, text=True, env=env_for(tmp_path),
                          stdin=subprocess.DEVNULL, timeout=timeout)


def test_cli_refuses_without_yes_or_in_readonly_lists_jobs_and_kills_with_yes(sshd_factory, ssh_env, tmp_path, job):
    proc, script = job
    (host,) = sshd_factory(1)
    cfg = str(write_config(tmp_path / "hosts.toml", ssh_env, host, str(script)))

    r = run(["kill", host.name, "sleeper", "--config", cfg], tmp_path)
    assert r.returncode == 2 and "--yes" in r.stderr, r.stderr
    assert proc.poll() is None
    assert audit(tmp_path)[-1]["result"].startswith("refused: not asking without a terminal")

    r = run(["--readonly", "kill", host.name, "sleeper", "--yes", "--config", cfg], tmp_path)
    assert r.returncode == 2 and "read-only" in r.stderr
    r = run(["kill", host.name, "sleeper", "--yes", "--readonly", "--config", cfg], tmp_path)
    assert r.returncode == 2 and "read-only" in r.stderr
    assert proc.poll() is None
    assert [e["result"].split(":")[0] for e in audit(tmp_path)] == ["refused"] * 3
    assert all(e["action"] == "kill" and e["host"] == host.name for e in audit(tmp_path))

    r = run(["dump", host.name, "nosuchjob", "--yes", "--config", cfg], tmp_path)
    # (the other jobs there are other processes on this machine: only ours is looked for)
    assert r.returncode == 2 and re.search(rf"no job nosuchjob on {host.name}; jobs there: .*\b[a-z2-9]{{5}} sleeper\b",
                                           r.stderr), r.stderr

    r = run(["kill", host.name, "sleeper", "--yes", "--json", "--config", cfg], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"Kill: job [a-z2-9]{{5}} sleeper on {host.name}", r.stdout) and str(proc.pid) in r.stdout
    assert psutil.Process().username() in r.stdout  # the plan names the processes' user
    outcome = json.loads(r.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "done" and outcome["plan"]["targets"][0]["pid"] == proc.pid
    assert proc.wait(5) == -15  # SIGTERM was enough
    assert [e["result"] for e in audit(tmp_path)[-2:]] == ["started", "done"]


def test_cli_action_on_a_host_that_is_not_connected_exits_3(ssh_env, tmp_path):
    cfg = tmp_path / "hosts.toml"
    s = settings_for(ssh_env, connect_timeout=1)
    lines = ["[settings]"] + [f"{k} = {toml_value(v)}" for k, v in s.items()]
    lines += ["", "[[hosts]]", 'name = "down"', 'ssh = "127.0.0.1:1"']
    cfg.write_text("\n".join(lines) + "\n")
    t0 = time.monotonic()
    r = run(["kill", "down", "x", "--yes", "--config", str(cfg)], tmp_path)
    assert r.returncode == 3 and "not connected" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 30


def test_cli_kill_follows_children_forked_on_sigterm_until_none_is_left(sshd_factory, ssh_env, tmp_path):
    """`kill --yes` on a job whose SIGTERM handler forks three SIGTERM-ignoring children and exits: the children
    are followed (pinned by pid and start time), killed after the grace, and listed in the outcome."""
    pids_file = tmp_path / "children"
    script = Path(__file__).parent / "scripts" / "forking_on_term_job.py"
    job = subprocess.Popen([PY, str(script), str(pids_file), "forking-marker"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, start_new_session=True)
    children: list[int] = []
    try:
        assert job.stdout.readline().strip() == b"ready"
        (host,) = sshd_factory(1)
        cfg = str(write_config(tmp_path / "hosts.toml", ssh_env, host, "forking-marker"))
        r = run(["kill", host.name, "sleeper", "--yes", "--json", "--config", cfg], tmp_path)
        children = [int(x) for x in pids_file.read_text().split()] if pids_file.exists() else []
        assert len(children) == 3, (children, r.stdout, r.stderr)
        outcome = json.loads(r.stdout.strip().splitlines()[-1])
        assert r.returncode == 0, r.stdout + r.stderr
        got = {o["pid"]: o for o in outcome["report"]["outcomes"]}
        assert set(children) <= set(got), outcome
        assert all(got[pid]["outcome"] == "killed" for pid in children), outcome
        assert job.wait(5) == 0  # its handler exited
        for pid in children:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        for pid in children:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        if job.poll() is None:
            job.kill()
            job.wait(5)

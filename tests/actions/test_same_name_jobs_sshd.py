"""Everyone's script is `train.py`: two runs of the same script on one real sshd host. A verb given the
name refuses (exit 2) with both candidates listed and signals nothing; given a short id it acts on that
job alone; `status` shows each id; a name that only one live job has is enough."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.actions.test_cli_actions_sshd import audit, env_for, gpuwatch
from tests.actions.test_service_sshd import SCRIPTS, gone, procs  # noqa: F401
from tests.core.helpers import host_entry, settings_for, toml_value, wait_for


def write_config(path: Path, ssh_env, host) -> Path:
    lines = ["[settings]"] + [f"{k} = {toml_value(v)}" for k, v in settings_for(ssh_env).items()]
    lines += ["", "[actions]", 'kill_grace = "1s"', "", "[[hosts]]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in host_entry(host).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_train(work: Path) -> int:
    """`nohup python train.py > train.log 2>&1 &` from a shell that then exits, in its own directory (a
    torch job, discovered; its parent is not this test's Python). Returns its pid."""
    work.mkdir()
    shutil.copy(SCRIPTS / "torch_buffered_job.py", work / "train.py")
    shutil.copy(SCRIPTS / "buffered_job.py", work / "buffered_job.py")
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    shell = f"nohup {shlex.quote(sys.executable)} train.py > train.log 2>&1 < /dev/null & echo $!"
    out = subprocess.run(["setsid", "sh", "-c", shell], cwd=work, env=env, capture_output=True, text=True,
                         timeout=30, check=True)
    return int(out.stdout.strip())


def alive(pid: int) -> bool:
    return not gone(pid)


def run(args, tmp_path, timeout=120):
    return subprocess.run(gpuwatch(*args), capture_output=True, text=True, env=env_for(tmp_path),
                          stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.timeout(300)
async def test_two_runs_of_train_py_a_name_is_refused_an_id_acts_on_one(sshd_factory, ssh_env, tmp_path, procs):
    _, started = procs
    (host,) = sshd_factory(1)
    runs = []
    for i in (1, 2):
        runs.append(start_train(tmp_path / f"run{i}"))
        started.append(runs[-1])
    for i, pid in enumerate(runs, 1):  # torch imported: each is a job from the first sample
        log = tmp_path / f"run{i}" / "train.log"
        await wait_for(lambda: f"hello from pid {pid}" in log.read_text(), 120, what="train.py started")
    cfg = str(write_config(tmp_path / "hosts.toml", ssh_env, host))

    r = run(["kill", host.name, "train.py", "--yes", "--config", cfg], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "2 jobs on" in r.stderr and "name one by its id" in r.stderr, r.stderr
    lines = {pid: next((x for x in r.stderr.splitlines() if re.search(rf"\b{pid}\b", x)), None) for pid in runs}
    assert all(lines.values()), r.stderr  # each candidate's line: id, name, pids, age, phase
    ids = {pid: line.split()[0] for pid, line in lines.items()}
    assert len(set(ids.values())) == 2 and all(" train.py " in line for line in lines.values()), r.stderr
    assert all(alive(pid) for pid in runs)  # nothing signalled
    assert audit(tmp_path)[-1]["result"].startswith("refused: 2 jobs on")

    r = run(["report", host.name, "train.py", "--config", cfg, "--dir", str(tmp_path / "reports")], tmp_path)
    assert r.returncode == 2 and all(sid in r.stderr for sid in ids.values()), r.stderr

    # status shows the same ids (every gpuwatch derives them alike) in its table and its JSON
    r = run(["status", "--json", "--config", cfg], tmp_path)
    jobs = {j["pids"][0]: j for j in json.loads(r.stdout)["jobs"] if j["name"] == "train.py" and j["pids"]}
    assert {pid: jobs[pid]["short_id"] for pid in ids} == ids, r.stdout
    r = run(["status", "--config", cfg], tmp_path)
    for pid, sid in ids.items():
        assert re.search(rf"\b{sid}\b.*train\.py", r.stdout), r.stdout

    first, second = runs
    r = run(["kill", host.name, ids[first], "--yes", "--config", cfg], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Kill: job {ids[first]} train.py on {host.name}" in r.stdout, r.stdout
    deadline = time.monotonic() + 30
    while alive(first) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gone(first) and alive(second)  # only the job named by its id
    assert [(e["result"], e.get("job_id")) for e in audit(tmp_path)[-2:]] == [("started", ids[first]),
                                                                               ("done", ids[first])]

    # one live train.py left: its name alone is enough
    r = run(["kill", host.name, "train.py", "--yes", "--config", cfg], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(second) in r.stdout and ids[second] in r.stdout

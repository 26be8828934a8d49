"""`gpuwatch status` with [slurm]: a real Slurm queue, and the running job's node watched over SSH (a test
sshd host standing for node gwnode1) with the job found by its batch script and its log path from Slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.core.helpers import settings_for, toml_value, write_toml
from tests.core.test_cli_e2e import check_schema

from .cluster import NODE


def _config(tmp_path, ssh_env, node_alias: str):
    path = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), [])
    with open(path, "a") as f:
        f.write("\n[slurm]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in {
            "login": "local", "user": "root", "node_jump": "none", "poll_interval": "2s"}.items()))
        f.write(f"\n[slurm.node_address]\n{NODE} = {toml_value(node_alias)}\n")
    return path


def _env(tmp_path, slurm_cluster) -> dict:
    env = dict(os.environ)
    env.pop("GPUWATCH_CONFIG", None)
    env.pop("SSH_AUTH_SOCK", None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["SLURM_CONF"] = str(slurm_cluster.conf)
    return env


def test_status_lists_slurm_jobs_and_watches_the_running_jobs_node(slurm_cluster, sshd_factory, ssh_env, tmp_path):
    (node,) = sshd_factory(1)
    c = slurm_cluster
    failed = c.sbatch("--job-name=fails", script="echo before failing; exit 3")
    c.wait_state(failed, {"FAILED"})
    running = c.sbatch("--job-name=train", "--time=5", "-o", "train-%j.log",
                       script="i=0; while true; do i=$((i+1)); echo step $i; sleep 0.3; done")
    pending = c.sbatch("--job-name=after", "--time=2", script="true")
    try:
        c.wait_state(running, {"RUNNING"})
        cfg = _config(tmp_path, ssh_env, node.name)
        r = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "status", "--json", "--config", str(cfg)],
                           capture_output=True, text=True, env=_env(tmp_path, c), timeout=90)
        assert "Traceback" not in r.stderr, r.stderr
        snap = json.loads(r.stdout)
        check_schema(snap)  # the documented schema is intact: the slurm object is an addition
        slurm = snap["slurm"]
        assert slurm["error"] is None and slurm["source"] == "squeue" and slurm["accounting"] is False
        jobs = {j["job_id"]: j for j in slurm["jobs"]}
        assert jobs[running]["state"] == "RUNNING" and jobs[running]["nodes"] == [NODE]
        assert jobs[running]["time_limit_s"] == 300
        log = f"{c.jobs_dir}/train-{running}.log"
        assert jobs[running]["stdout"] == log
        assert jobs[pending]["state"] == "PENDING" and jobs[pending]["reason"] in ("Resources", "Priority")
        assert jobs[failed]["state"] == "FAILED" and jobs[failed]["exit_code"] == 3
        # The running job's node is a watched host, reached over SSH, and the job is watched there.
        hosts = {h["name"]: h for h in snap["hosts"]}
        assert hosts[NODE]["state"] == "connected", hosts[NODE]
        (job,) = [j for j in snap["jobs"] if j["name"] == f"slurm-{running}"]
        assert job["host"] == NODE
        assert job.get("pids"), job
        assert log in json.dumps(job), job  # the log gpuwatch tails is the one Slurm names
        # The table says the same in words.
        t = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "status", "--config", str(cfg)],
                           capture_output=True, text=True, env=_env(tmp_path, c), timeout=90)
        assert "SLURM (local, user root)" in t.stdout, t.stdout
        line = next(x for x in t.stdout.splitlines() if x.startswith(pending + " "))
        assert "PENDING" in line and "(Resources)" in line or "(Priority)" in line
        line = next(x for x in t.stdout.splitlines() if x.startswith(failed + " "))
        assert "FAILED" in line and " 3 " in line
        assert f"gpuwatch scancel {running}" in t.stdout
    finally:
        c.run(["scancel", running, pending], check=False)


def test_status_says_when_the_login_node_cannot_be_reached(tmp_path):
    from tests.support.net import free_port

    port = free_port("127.0.0.1")  # nothing listens there
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(f'[settings]\nconnect_timeout = 3\nsample_interval = 0.2\n\n[[hosts]]\nname = "me"\nlocal = true\n\n'
                   f'[slurm]\nlogin = "gw@127.0.0.1:{port}"\n')
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("GPUWATCH_CONFIG", None)
    r = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "status", "--config", str(cfg)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    line = next(x for x in r.stdout.splitlines() if "queue not read" in x)
    assert line.strip() == f"queue not read: squeue --noheader --user=gw: login node gw@127.0.0.1:{port}: connection refused"

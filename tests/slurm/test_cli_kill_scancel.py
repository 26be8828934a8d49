"""`gpuwatch kill NODE slurm-<id>` with [slurm] configured, as a person runs it (a subprocess): the verb reads the
queue first (so the job's node is a host it knows), plans scancel instead of signalling pids, and the job ends
CANCELLED in Slurm. Real Slurm, the job's node watched over a real sshd."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.core.helpers import settings_for, toml_value, write_toml

from .cluster import NODE


def test_kill_help_says_a_slurm_job_is_cancelled_with_scancel():
    r = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "kill", "--help"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and "a Slurm job is cancelled with scancel" in " ".join(r.stdout.split()), r.stdout


def test_cli_kill_of_a_slurm_job_is_scancel(slurm_env, sshd_factory, ssh_env, tmp_path):
    c = slurm_env
    (node,) = sshd_factory(1)
    job = c.sbatch("--job-name=train", "--time=5", "-o", "train-%j.log",
                   script="while true; do echo tick; sleep 0.5; done")
    try:
        c.wait_state(job, {"RUNNING"})
        cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), [])
        with cfg.open("a") as f:
            f.write("\n[slurm]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in {
                "login": "local", "user": "root", "node_jump": "none", "node_address": {NODE: node.name}}.items()) + "\n")
        env = {**ssh_env.environ(), "SLURM_CONF": str(c.conf), "XDG_STATE_HOME": str(tmp_path / "state")}
        env.pop("GPUWATCH_CONFIG", None)
        r = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "kill", "--config", str(cfg), NODE,
                            f"slurm-{job}", "--yes", "--json"],
                           capture_output=True, text=True, env=env, timeout=90, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"scancel -- {job}" in r.stdout, r.stdout  # the plan shown: scancel, not pids
        outcome = json.loads(r.stdout.strip().splitlines()[-1])
        assert outcome["ok"] is True, outcome
        assert c.wait_state(job, {"CANCELLED"}, 20) == "CANCELLED"
        audit = [json.loads(line) for line in (tmp_path / "state" / "gpuwatch" / "audit.jsonl").read_text().splitlines()]
        assert any(e["action"] == "kill" and "scancel" in json.dumps(e) for e in audit), audit
    finally:
        c.run(["scancel", job], check=False)

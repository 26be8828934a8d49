"""`gpuwatch scancel` as a person runs it (a subprocess) against a real Slurm: refusals with reasons and
exit 2, a confirmed cancel with exit 0, every attempt in the audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run(tmp_path, slurm_cluster, *args, config: bool = True):
    cfg = tmp_path / "hosts.toml"
    body = '[[hosts]]\nname = "here"\nlocal = true\n'
    if config:
        body += '\n[slurm]\nlogin = "local"\nuser = "root"\n'
    cfg.write_text(body)
    env = {**os.environ, "SLURM_CONF": str(slurm_cluster.conf), "XDG_STATE_HOME": str(tmp_path / "state"),
           "HOME": str(tmp_path)}
    env.pop("GPUWATCH_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "scancel", "--config", str(cfg), *args],
                          capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def audit(tmp_path) -> list[dict]:
    path = tmp_path / "state" / "gpuwatch" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_scancel_verb(slurm_cluster, tmp_path):
    c = slurm_cluster
    holder = c.sbatch("--job-name=holder", "--time=5", script="sleep 120")
    c.wait_state(holder, {"RUNNING"})
    waiting = c.sbatch("--job-name=waiting", script="sleep 1")
    try:
        r = run(tmp_path, c, holder, config=False)
        assert r.returncode == 2 and "no [slurm] section" in r.stderr, r.stderr
        r = run(tmp_path, c, "12;reboot")
        assert r.returncode == 2 and "not a Slurm job id" in r.stderr, r.stderr
        r = run(tmp_path, c, "999999")
        assert r.returncode == 2 and "does not know job 999999" in r.stderr, r.stderr
        r = run(tmp_path, c, waiting, "--signal", "USR1", "--yes")
        assert r.returncode == 2 and "pending" in r.stderr, r.stderr
        r = run(tmp_path, c, holder)  # no terminal to ask on, no --yes
        assert r.returncode == 2 and "not confirmed" in r.stderr, r.stderr
        assert c.job_state(holder) == "RUNNING"
        r = run(tmp_path, c, holder, "--yes", "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["status"] == "done" and out["argv"] == ["scancel", "--", holder] and out["job"]["name"] == "holder"
        assert c.wait_state(holder, {"CANCELLED"}, 20) == "CANCELLED"
        r = run(tmp_path, c, holder, "--yes")
        assert r.returncode == 2 and "has ended (CANCELLED)" in r.stderr, r.stderr
        results = [(e["action"], e["result"].split(":")[0]) for e in audit(tmp_path)]
        assert results.count(("scancel", "refused")) == 6 and ("scancel", "done") in results, results
    finally:
        c.run(["scancel", holder, waiting], check=False)

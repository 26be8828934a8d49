"""Slurm fields are host-controlled too: a job named with OSC 2, OSC 52 and RLO (sbatch takes it as given)
shows in `gpuwatch status`'s queue table and in the scancel plan visibly, never raw."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.badinput.hostile_strings import raw_bytes_found

from .test_cli_scancel import run as run_scancel
from .test_status_e2e import _env

NAME = "t\x1b]2;PWNED\x07\x1b]52;c;cHduZWQ=\x07\u202eevil"


def test_a_hostile_job_name_in_the_queue_and_the_scancel_plan(slurm_cluster, tmp_path):
    c = slurm_cluster
    job = c.sbatch(f"--job-name={NAME}", "--time=5", script="sleep 120")
    try:
        c.wait_state(job, {"RUNNING"})
        cfg = tmp_path / "hosts.toml"
        cfg.write_text('[[hosts]]\nname = "here"\nlocal = true\n\n[slurm]\nlogin = "local"\nuser = "root"\n')
        r = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "status", "--config", str(cfg)],
                           capture_output=True, env=_env(tmp_path, c), timeout=90)
        assert not raw_bytes_found(r.stdout + r.stderr), r.stdout
        assert "t␛]2;PWNED".encode() in r.stdout, r.stdout  # the queue table (its NAME column may cut the rest)
        r = run_scancel(tmp_path, c, job, "--yes")
        out = (r.stdout + r.stderr).encode()
        assert r.returncode == 0, out
        assert not raw_bytes_found(out), out
        assert "t␛]2;PWNED␇␛]52;c;cHduZWQ=␇<U+202E>evil".encode() in out, out
    finally:
        c.run(["scancel", job], check=False)

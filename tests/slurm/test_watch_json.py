"""`gpuwatch watch --json` with [slurm]: every line carries the same `slurm` object as `status --json` (an
addition: the documented schema holds), re-read every poll_interval; a job that starts while it runs appears
in it, and its node and batch script are watched from then on. Real Slurm, the node a real sshd."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.core.test_cli_e2e import check_schema

from .cluster import NODE
from .test_status_e2e import _config, _env


def test_watch_json_carries_the_slurm_object(slurm_cluster, sshd_factory, ssh_env, tmp_path):
    (node,) = sshd_factory(1)
    c = slurm_cluster
    cfg = _config(tmp_path, ssh_env, node.name)
    cfg.write_text(cfg.read_text().replace('poll_interval = "2s"', 'poll_interval = "1s"'))
    first = c.sbatch("--job-name=first", "--time=5", "-o", "first-%j.log", script="while true; do echo a; sleep 0.3; done")
    later = None
    proc = None
    try:
        c.wait_state(first, {"RUNNING"})
        proc = subprocess.Popen([sys.executable, "-m", "gpuwatch_tui.cli", "watch", "--json", "--count", "150",
                                 "--config", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(tmp_path, c))
        snap = json.loads(proc.stdout.readline())
        check_schema(snap)  # the slurm object is an addition
        jobs = {j["job_id"]: j for j in snap["slurm"]["jobs"]}
        assert snap["slurm"]["error"] is None and jobs[first]["state"] == "RUNNING", snap["slurm"]
        assert jobs[first]["stdout"] == f"{c.jobs_dir}/first-{first}.log"
        # The job that starts now: the next queue reads list it, and it is watched on its node.
        c.run(["scancel", first])
        later = c.sbatch("--job-name=later", "--time=5", "-o", "later-%j.log",
                         script="while true; do echo b; sleep 0.3; done")
        deadline = time.monotonic() + 30
        seen = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            snap = json.loads(line)
            assert "slurm" in snap, sorted(snap)
            listed = {j["job_id"]: j for j in snap["slurm"]["jobs"]}
            watched = [j for j in snap["jobs"] if j["name"] == f"slurm-{later}" and j.get("pids")]
            if later in listed and listed[later]["state"] == "RUNNING" and watched:
                seen = (listed, watched[0])
                break
        assert seen is not None, f"the later job never listed and watched; last line: {snap}"
        listed, job = seen
        assert job["host"] == NODE and f"{c.jobs_dir}/later-{later}.log" in json.dumps(job), job
        check_schema(snap)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        c.run(["scancel", first, *([later] if later else [])], check=False)

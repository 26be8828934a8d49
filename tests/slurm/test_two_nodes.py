"""A two-node job on the two-slurmd test Slurm: gpuwatch lists both nodes and would watch both, with the
batch script on the first; its srun step runs on both nodes."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.slurm.client import SlurmClient
from gpuwatch_tui.slurm.hosts import with_slurm_jobs
from gpuwatch_tui.slurm.runner import LocalRunner
from gpuwatch_tui.slurm.settings import SlurmConfig


def test_two_node_job(slurm_cluster_2, monkeypatch):
    c = slurm_cluster_2
    monkeypatch.setenv("SLURM_CONF", str(c.conf))
    job = c.sbatch("-N", "2", "--job-name=two nodes", "--time=2", "-o", "two-%j-%N.log",
                   script="srun --ntasks-per-node=1 sh -c 'echo rank $SLURM_PROCID on $SLURMD_NODENAME; sleep 60'")
    try:
        c.wait_state(job, {"RUNNING"})
        read = asyncio.run(SlurmClient(LocalRunner(), SlurmConfig(user="root")).queue())
        (two,) = [j for j in read.jobs if j.job_id == job]
        assert two.nodes == ("gwnode1", "gwnode2") and two.nodelist == "gwnode[1-2]"
        # %N is the batch node's host name (both test nodes run on this machine: its host name).
        assert two.stdout == f"{c.jobs_dir}/two-{job}-{socket.gethostname()}.log"
        cfg = parse_config({"hosts": [{"name": "me", "local": True}],
                            "slurm": {"login": "local", "node_jump": "none",
                                      "node_address": {"gwnode1": "127.0.0.2", "gwnode2": "127.0.0.3"}}}, "t.toml")
        watched = with_slurm_jobs(cfg, read.jobs)
        assert [(h.name, h.host) for h in watched.hosts[1:]] == [("gwnode1", "127.0.0.2"), ("gwnode2", "127.0.0.3")]
        (spec,) = watched.jobs
        assert spec.host == "gwnode1" and spec.name == f"slurm-{job}"
        deadline = time.monotonic() + 15
        log = Path(two.stdout)
        while time.monotonic() < deadline and not (log.exists() and log.read_text().count("rank") == 2):
            time.sleep(0.2)
        assert sorted(log.read_text().split("\n")[:2]) == ["rank 0 on gwnode1", "rank 1 on gwnode2"]
    finally:
        c.run(["scancel", job], check=False)

"""Slurm jobs -> what the rest of gpuwatch watches: each node of a running job as a host (SSH,
through the login node by default), and each running job as a configured job on its batch node,
found by its batch script and with its log path from Slurm.

The jobs are named `slurm-<id>` so the Slurm job id reaches the job view (and multi-node grouping
can join it with the ranks' SLURM_JOB_ID).
"""

from __future__ import annotations

import dataclasses
import re

from typing import TYPE_CHECKING

from ..config_records import HostConfig, JobConfig, split_ssh_target
from ..jobs.integration import spec_from_config
from .records import SlurmJob
from .settings import SlurmConfig

if TYPE_CHECKING:  # the assembled config is handed in by the CLI and the dashboard, above this wing
    from ..config import Config


def job_name(job: SlurmJob) -> str:
    return f"slurm-{job.job_id}"


def slurm_id_of(job_name_: str) -> str | None:
    """'slurm-123_4' -> '123_4' (the id scancel takes); None for a job that is not Slurm's."""
    m = re.match(r"^slurm-(\d+(?:_\d+)?)(?:#\d+)?$", job_name_)
    return m.group(1) if m else None


def node_host(node: str, slurm: SlurmConfig) -> HostConfig:
    address = slurm.address_of(node)
    user, host, port = split_ssh_target(address)
    login = slurm.login_host
    jump = None
    if slurm.node_jump == "login" and login is not None:
        jump = login.ssh
    elif slurm.node_jump not in ("login", "none"):
        jump = slurm.node_jump
    return HostConfig(name=node, ssh=address, host=host, port=port,
                      user=user or slurm.node_user or (login.user if login is not None else None),
                      identity_file=slurm.node_identity_file or (login.identity_file if login else None), jump=jump)


def batch_script_match(job: SlurmJob) -> str:
    """slurmd runs the batch script as <SlurmdSpoolDir>/job<id, 5 digits>/slurm_script."""
    raw = job.raw_id or job.job_id.split("_")[0]
    return rf"/job0*{re.escape(raw)}/slurm_script(\s|$)"


def new_watch_items(slurm: SlurmConfig, jobs: list[SlurmJob], known_hosts: set[str],
                    known_jobs: set[str]) -> tuple[list[HostConfig], list[JobConfig]]:
    """The hosts and jobs the running `jobs` add to what is watched already (names in the known sets)."""
    hosts: list[HostConfig] = []
    specs: list[JobConfig] = []
    if not slurm.watch_nodes:
        return hosts, specs
    names = set(known_hosts)
    for job in jobs:
        if not (job.is_active and job.nodes) or job_name(job) in known_jobs:
            continue
        for node in job.nodes:
            if node not in names:
                hosts.append(node_host(node, slurm))
                names.add(node)
        logs = tuple(dict.fromkeys(p for p in (job.stdout, job.stderr) if p))
        specs.append(JobConfig(name=job_name(job), host=job.nodes[0], match=batch_script_match(job), logs=logs))
    return hosts, specs


def with_slurm_jobs(config: Config, jobs: list[SlurmJob]) -> Config:
    """`config` plus the nodes of the running `jobs` as hosts and the jobs as [[jobs]] entries."""
    if config.slurm is None:
        return config
    hosts, specs = new_watch_items(config.slurm, jobs, {h.name for h in config.hosts}, {j.name for j in config.jobs})
    return dataclasses.replace(config, hosts=(*config.hosts, *hosts), jobs=(*config.jobs, *specs))


def adopt_new_jobs(monitor, slurm: SlurmConfig, jobs: list[SlurmJob], known_jobs: set[str]) -> list[str]:
    """Start watching the nodes and batch scripts of running jobs that started after the watch began
    (`known_jobs` is updated). Returns the names of the jobs added."""
    hosts, specs = new_watch_items(slurm, jobs, set(monitor.sessions), known_jobs)
    for host in hosts:
        monitor.add_host(host)
    for j in specs:
        monitor.add_job(spec_from_config(j))
        known_jobs.add(j.name)
    return [j.name for j in specs]

"""A real one-machine Slurm (munged + slurmctld + slurmd, tests/slurm/cluster.py), started once per
session and stopped by pid at the end. Without Slurm (or not root) the tests that need it are
skipped with the reason, except where scripts/test.sh installed it (tests/support/services.py):
there a missing Slurm is a failure."""

from __future__ import annotations


import pytest

from tests.support.services import service_missing

from .cluster import SlurmCluster, slurm_unavailable_reason


def _missing(reason: str) -> None:
    service_missing("Slurm", reason)


def _running_cluster(tmp_path_factory, name: str, nodes: int = 1):
    reason = slurm_unavailable_reason()
    if reason:
        _missing(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp(name), nodes=nodes)
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    yield from _running_cluster(tmp_path_factory, "slurm")


@pytest.fixture
def slurm_env(slurm_cluster, monkeypatch):
    """This process's Slurm clients (squeue, sacct, scontrol, scancel run by gpuwatch) use the test cluster."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    return slurm_cluster


@pytest.fixture(scope="session")
def slurm_cluster_2(tmp_path_factory):
    """The same, with two slurmd (gwnode1, gwnode2) on this machine: jobs with `-N 2` and srun steps."""
    yield from _running_cluster(tmp_path_factory, "slurm2", nodes=2)

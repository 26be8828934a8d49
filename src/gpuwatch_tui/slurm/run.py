"""Build the Slurm pieces from a Config: the runner for the login node and the client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .client import SlurmClient
from .runner import CommandRunner, LocalRunner, SshRunner
from .watch import SlurmWatch

if TYPE_CHECKING:  # the assembled config is handed in by the CLI and the dashboard, above this wing
    from ..config import Config


def make_runner(config: Config, connector=None) -> CommandRunner:
    slurm = config.slurm
    assert slurm is not None
    if slurm.is_local:
        return LocalRunner()
    if connector is None:
        from ..transport.ssh import SshConnector  # asyncssh only when the login node is remote

        connector = SshConnector(config.settings)
    return SshRunner(slurm.login_host, connector)


def make_watch(config: Config, connector=None) -> SlurmWatch:
    return SlurmWatch(SlurmClient(make_runner(config, connector), config.slurm))

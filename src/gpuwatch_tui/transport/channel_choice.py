"""Which channel carries a host's probe: a child process for this machine, SSH for any other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config_records import HostConfig
from .channel import LocalProbeChannel, ProbeChannel

if TYPE_CHECKING:
    from .ssh import SshConnector


def probe_channel(host: HostConfig, connector: SshConnector | None) -> ProbeChannel:
    if host.local:
        return LocalProbeChannel(host)
    # asyncssh only when a host needs it: a dashboard of this machine alone never loads it (start-up).
    from .ssh_channel import SshProbeChannel

    return SshProbeChannel(host, connector)

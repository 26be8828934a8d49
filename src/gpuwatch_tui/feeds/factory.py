"""Which feed watches a host: chosen from its config, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import HostConfig, Settings
from .base import FeedSink, HostFeed

if TYPE_CHECKING:
    from ..transport.ssh import SshConnector


def make_feed(host: HostConfig, settings: Settings, sink: FeedSink, connector: SshConnector | None) -> HostFeed:
    """The probe feed, over SSH or as a local child (the only kinds a host config names today).

    New sources (Prometheus samples, Slurm job specs) add their branch here."""
    from ..hostsession import HostSession

    return HostSession(host, settings, connector, sink)

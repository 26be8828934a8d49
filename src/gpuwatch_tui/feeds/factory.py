"""Which feed watches a host: chosen from its config, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config_records import HostConfig, Settings
from .base import FeedSink, HostFeed
from .hostsession import HostSession
from .layered import LayeredFeed

if TYPE_CHECKING:
    from ..transport.ssh import SshConnector


def make_feed(host: HostConfig, settings: Settings, sink: FeedSink, connector: SshConnector | None) -> HostFeed:
    """The probe feed, over SSH or as a local child; a Prometheus source's feed for a host whose GPUs
    Prometheus has; both layered (SSH first) for a host that has an ssh entry and a source."""
    if host.source is None:
        return HostSession(host, settings, connector, sink)
    from .prometheus import PrometheusFeed, shared_poller  # httpx only when a source is configured

    poller = shared_poller(host.source, sink)
    if not (host.ssh or host.local):
        return PrometheusFeed(host, settings, sink, poller)
    return LayeredFeed(host.name, sink,
                       lambda side: HostSession(host, settings, connector, side),
                       lambda side: PrometheusFeed(host, settings, side, poller))

"""Hosts whose GPUs are read from Prometheus (dcgm-exporter series), through the feed seam.

One `SourcePoller` per [[sources]] entry asks Prometheus two instant queries per interval for all of
its hosts together (the values of every metric gpuwatch reads, and the timestamps of one of them to
date each host's last scrape): 500 hosts cost the same two requests as one. Each host has a thin
`PrometheusFeed` that the poller hands its share to; the feed reports into the sink as any feed
does, so the store and the UI do not know the figures came from Prometheus (gpu_source says so).

A host's sample is dated by its last scrape, so its age is the scrape age. A sample is reported
only when a newer scrape is there (the history holds one point per scrape). States:
connected (fresh data), stale (the last scrape is old, or the host's series went away), and the
state a failed query means for every host of the source (prometheus_api.PromError).
"""

from __future__ import annotations

import asyncio
import time
import weakref

from ..config_records import HostConfig, PrometheusSource, Settings
from ..requests import RequestError
from ..vocab import HOST_UNREACHABLE, fmt_duration
from .base import DEFAULT_REQUEST_TIMEOUT_S, FeedSink, HostFeed
from .dcgm import SCRAPE_CLOCK_METRIC, HostGpus, history_by_host, latest_by_host, metrics_selector
from .prometheus_api import PromClient, PromError
from ..tasks import cancel_and_wait

UNSUPPORTED = "unsupported"  # RequestError code: this feed carries no ops to the host
# A host whose last scrape is older than this many scrape intervals is stale (one missed scrape is normal).
STALE_AFTER_INTERVALS = 2.5


class PrometheusFeed(HostFeed):
    """One host of a Prometheus source: states and samples as the source's poller finds them."""

    def __init__(self, host: HostConfig, settings: Settings, sink: FeedSink, poller: SourcePoller) -> None:
        assert host.source is not None
        self.name = host.name
        self.source = host.source
        self.settings = settings
        self.sink = sink
        self.poller = poller
        self.state = "connecting"
        self._reported: tuple[str, str | None] | None = None
        self.last_scrape: float | None = None  # the newest scrape reported (Prometheus's clock)

    def start(self) -> asyncio.Task:
        self._set("connecting", None)
        return self.poller.attach(self)

    async def stop(self) -> None:
        await self.poller.detach(self)

    async def wants(self, pids: list[int], tails: dict[str, str], dirs: dict[str, str],
                    matches: dict[str, dict]) -> None:
        """Prometheus has no processes, logs or files of the host: nothing to ask for."""

    async def request(self, op: str, args: dict | None = None,
                      timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict:
        raise RequestError(UNSUPPORTED, f"{self.name}: its GPUs are read from Prometheus ({self.source.url}); "
                           f"there is no connection to the host to run {op!r} on (add an ssh entry for it)")

    # -- from the poller -------------------------------------------------------------
    def history(self, points: list[tuple[float, HostGpus]]) -> None:
        for at, gpus in points:
            self.sink.host_sample(self.name, gpus.sample(at))

    def latest(self, gpus: HostGpus | None, now: float) -> None:
        if gpus is None or gpus.time is None:
            if self.last_scrape is None:
                self._set(HOST_UNREACHABLE, f"Prometheus at {self.source.url} has no DCGM series for host "
                          f"{self.name!r} (labels Hostname/hostname{self._selector_words()})")
            else:
                self._set("stale", f"no DCGM series for this host in Prometheus since "
                          f"{_ago(now - self.last_scrape)} (exporter down or not scraped)")
            return
        age = max(0.0, now - gpus.time)
        if age > self._stale_after():
            self._set("stale", f"last scrape {_ago(age)} (Prometheus at {self.source.url})")
        else:
            self._set("connected", None)
        if self.last_scrape is None or gpus.time > self.last_scrape:
            self.last_scrape = gpus.time
            self.sink.host_sample(self.name, gpus.sample(gpus.time))

    def failed(self, error: PromError) -> None:
        self._set(error.state, error.reason)

    # ------------------------------------------------------------------------------
    def _stale_after(self) -> float:
        return max(self.settings.stale_after, STALE_AFTER_INTERVALS * self.source.interval)

    def _selector_words(self) -> str:
        return f", selector {{{self.source.selector}}}" if self.source.selector else ""

    def _set(self, state: str, error: str | None) -> None:
        self.state = state
        if self._reported == (state, error):
            return  # the same state every interval would only churn the readers
        self._reported = (state, error)
        self.sink.host_state(self.name, state, error, None)


def _ago(seconds: float) -> str:
    return f"{fmt_duration(seconds)} ago"


class SourcePoller:
    """Queries one Prometheus source for all of its hosts' feeds, one query set per interval."""

    def __init__(self, source: PrometheusSource, client: PromClient | None = None) -> None:
        self.source = source
        self.client = client or PromClient(source.url, source.timeout)
        self.feeds: dict[str, PrometheusFeed] = {}
        self._task: asyncio.Task | None = None
        self._on_empty = None
        self.polls = 0
        selector = metrics_selector(source.selector)
        self.values_query = selector
        extra = f"{{{source.selector}}}" if source.selector else ""
        self.stamps_query = f"timestamp({SCRAPE_CLOCK_METRIC}{extra})"

    def attach(self, feed: PrometheusFeed) -> asyncio.Task:
        self.feeds[feed.name] = feed
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"prometheus:{self.source.name}")
        return self._task

    async def detach(self, feed: PrometheusFeed) -> None:
        self.feeds.pop(feed.name, None)
        if not self.feeds:
            await self.close()

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.client.aclose()
        if self._on_empty is not None:
            self._on_empty()

    async def run(self) -> None:
        await asyncio.sleep(0)  # let every feed of the source attach before the first query
        if self.source.backfill:
            await self._backfill()
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self.poll_once()
            await asyncio.sleep(max(0.0, self.source.interval - (loop.time() - started)))

    async def poll_once(self) -> None:
        try:
            values, stamps = await asyncio.gather(self.client.query(self.values_query),
                                                  self.client.query(self.stamps_query))
        except PromError as exc:
            for feed in list(self.feeds.values()):
                feed.failed(exc)
            return
        self.polls += 1
        found = latest_by_host(values, stamps)
        now = time.time()
        for name, feed in list(self.feeds.items()):
            feed.latest(found.get(name), now)

    async def _backfill(self) -> None:
        """The recent history the GPU grid draws at start, one point per interval (best effort:
        a failure here shows up again, with its reason, on the first live query)."""
        end = time.time()
        start = end - self.source.backfill * self.source.interval
        try:
            matrix = await self.client.query_range(self.values_query, start, end, self.source.interval)
        except PromError:
            return
        for name, points in history_by_host(matrix).items():
            feed = self.feeds.get(name)
            if feed is not None:
                # The newest point is left to the live query: it comes with its scrape time.
                feed.history(points[:-1])


# One poller per (sink, source): the feeds of one Monitor share it; another Monitor gets its own.
_pollers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def shared_poller(source: PrometheusSource, sink: FeedSink) -> SourcePoller:
    by_source = _pollers.setdefault(sink, {})
    poller = by_source.get(source)
    if poller is None:
        poller = by_source[source] = SourcePoller(source)
        poller._on_empty = lambda: by_source.pop(source, None)
    return poller

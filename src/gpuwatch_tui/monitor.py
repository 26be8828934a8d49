"""The headless core: host feeds report into the store and the job tracker; commands go out.

The dashboard and the `status` / `watch` verbs drive exactly this object.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from .actions.job_facts import JobFacts
from .config import Config, HostConfig
from .feeds.base import DEFAULT_REQUEST_TIMEOUT_S, HostFeed
from .feeds.factory import make_feed
from .jobs.integration import make_tracker
from .model import HostSample
from .requests import UNKNOWN_HOST, RequestError
from .store import Store
from .vocab import HOST_TERMINAL_STATES


def _reached_over_ssh(host: HostConfig) -> bool:
    """A host the probe reaches over SSH: one with an ssh target (alone or under a Prometheus source).
    A Prometheus-only host and this machine need no SSH connector (nor asyncssh)."""
    return not host.local and (host.ssh is not None or host.source is None)


class Monitor:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.settings = config.settings
        self.store = Store([h.name for h in config.hosts], config.settings.history)
        self.tracker = make_tracker(config)
        self.connector = None
        if any(_reached_over_ssh(h) for h in config.hosts):
            from .transport.ssh import SshConnector  # asyncssh only when a host needs it

            self.connector = SshConnector(config.settings)
        # One feed per host, by name (the probe over SSH or locally, today).
        self.sessions: dict[str, HostFeed] = {
            h.name: make_feed(h, config.settings, self, self.connector) for h in config.hosts
        }
        self.last_samples: dict[str, HostSample] = {}  # host -> its latest frame (GPU holders for actions)
        self.job_facts = JobFacts(self)  # restart facts at discovery, a restarted run's exit status
        self._pushed: dict = {}  # host -> the ProbeWants last pushed to its feed
        self._subscribers: list[Callable[[], None]] = []
        self._settled = {name: asyncio.Event() for name in self.sessions}
        self._stopped = False

    # -- FeedSink ------------------------------------------------------------------
    def host_state(self, host: str, state: str, error: str | None, hint: str | None,
                   retry_at: float | None = None) -> None:
        self.store.set_state(host, state, error, hint, retry_at)
        if state in HOST_TERMINAL_STATES:
            self._settled[host].set()
        self._notify()

    def host_sample(self, host: str, sample: HostSample) -> None:
        self.store.apply_sample(host, sample)
        self.last_samples[host] = sample
        # A sample without process facts (Prometheus while SSH is down) updates the GPUs only: fed to the
        # job engine its empty process list would end every job on the host.
        if sample.procs_known:
            self.tracker.update(host, sample, time.time())
            self._push_wants(host)
            self.job_facts.on_sample(host)
        self._settled[host].set()
        self._notify()

    def _push_wants(self, host: str) -> None:
        wants = self.tracker.wanted(host)
        # The same wants as last pushed: nothing to do (a feed keeps the latest and sends it again on
        # reconnecting), and no task to make for it on every frame of every host.
        last = self._pushed.get(host)
        if last is wants or last == wants:  # (the tracker hands the same object while nothing changed)
            return
        self._pushed[host] = wants
        session = self.sessions[host]
        asyncio.ensure_future(session.wants(wants.pids, wants.tails, wants.dirs, wants.matches))

    # -- commands ------------------------------------------------------------------
    async def request(self, host: str, op: str, args: dict | None = None,
                      timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> dict:
        """Run `op` on `host` (see probe/ops_*.py) and return its result; raises RequestError."""
        feed = self.sessions.get(host)
        if feed is None:
            raise RequestError(UNKNOWN_HOST, f"no host named {host!r} (hosts: {', '.join(self.sessions) or 'none'})")
        return await feed.request(op, args, timeout)

    # -- hosts and jobs that appear while watching (a Slurm job's nodes) -------------
    def add_host(self, host: HostConfig) -> bool:
        """Start watching `host` now; False if a host of that name is already watched."""
        if host.name in self.sessions or not self.store.add_host(host.name):
            return False
        if self.connector is None and _reached_over_ssh(host):
            from .transport.ssh import SshConnector  # asyncssh only when a host needs it

            self.connector = SshConnector(self.settings)
        self._settled[host.name] = asyncio.Event()
        session = make_feed(host, self.settings, self, self.connector)
        self.sessions[host.name] = session
        session.start()
        self._push_wants(host.name)
        self._notify()
        return True

    def add_job(self, spec) -> None:
        """Watch one more configured job (a JobSpec) on a watched host."""
        self.tracker.add_spec(spec, time.time())
        if spec.host in self.sessions:
            self._push_wants(spec.host)
        self._notify()

    # -- subscribers ---------------------------------------------------------------
    def subscribe(self, callback: Callable[[], None]) -> None:
        self._subscribers.append(callback)

    def _notify(self) -> None:
        for callback in self._subscribers:
            callback()

    # -- running -------------------------------------------------------------------
    async def start(self) -> None:
        for session in self.sessions.values():
            session.start()
        for host in self.sessions:
            self._push_wants(host)

    async def run(self) -> None:
        await self.start()
        while not self._stopped:
            await asyncio.sleep(3600)

    async def wait_settled(self, timeout: float) -> None:
        """Until every host has a sample or a definite failure, or the timeout passes."""
        waits = [asyncio.ensure_future(e.wait()) for e in self._settled.values()]
        if not waits:
            return
        try:
            # asyncio.wait, not wait_for(gather(...)): a cancelled gather logs
            # "exception was never retrieved" when Ctrl-C interrupts `status`.
            await asyncio.wait(waits, timeout=timeout)
        finally:
            for w in waits:
                w.cancel()

    async def stop(self) -> None:
        self._stopped = True
        self.job_facts.cancel()
        await asyncio.gather(*(s.stop() for s in self.sessions.values()), return_exceptions=True)
        if self.connector is not None:
            await self.connector.close()

    def jobs_json(self, now: float | None = None) -> list[dict]:
        return self.tracker.to_json(time.time() if now is None else now)

    def snapshot(self, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        return self.store.snapshot(now, self.jobs_json(now))


"""Shared parts of the fault-injection tests: a Monitor over real sshd hosts, and what it reported.

`Watched` records every state change and every sample arrival per host (monotonic times), so a
test can say how long a host took to be called stale and to send data again, and how long the
longest gap in another host's samples was.
"""

from __future__ import annotations

import asyncio
import gc
import time

from gpuwatch_tui.monitor import Monitor

from tests.core.helpers import host_rec, make_config, wait_for

DOWN_STATES = ("stale", "reconnecting", "unreachable")


def relayed_entry(name: str, host, relay, ssh_env) -> dict:
    """A [[hosts]] table reaching `host` through `relay` on 127.0.0.1."""
    return {"name": name, "ssh": f"{host.user}@127.0.0.1:{relay.port}",
            "identity_file": str(ssh_env.identity_file), "gpu_source": "nvidia-smi"}


class Watched:
    """A Monitor plus a log of (time, state) and sample times per host."""

    def __init__(self, ssh_env, hosts: list[dict], **settings) -> None:
        self.monitor = Monitor(make_config(ssh_env, hosts, **settings))
        self.states: dict[str, list[tuple[float, str]]] = {n: [] for n in self.monitor.sessions}
        self.samples: dict[str, list[float]] = {n: [] for n in self.monitor.sessions}
        monitor = self.monitor
        outer = self

        class Sink:
            def host_state(self, host, state, error, hint, retry_at=None):
                outer.states[host].append((time.monotonic(), state))
                monitor.host_state(host, state, error, hint, retry_at)

            def host_sample(self, host, sample):
                outer.samples[host].append(time.monotonic())
                monitor.host_sample(host, sample)

        for session in monitor.sessions.values():
            session.sink = Sink()

    async def __aenter__(self) -> "Watched":
        await self.monitor.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.monitor.stop()

    def state(self, name: str) -> str:
        return host_rec(self.monitor, name).state

    async def connected(self, names, timeout: float = 15.0) -> None:
        await wait_for(lambda: all(self.state(n) == "connected" and self.samples[n] for n in names), timeout,
                       what=f"{names} connected: " + str({n: (self.state(n), host_rec(self.monitor, n).error)
                                                          for n in names}))

    async def first_sample_after(self, name: str, t0: float, timeout: float) -> float:
        """Seconds from t0 to the first sample of `name` that arrived after t0."""
        await wait_for(lambda: any(t > t0 for t in self.samples[name]), timeout,
                       what=f"a sample from {name}: state {self.state(name)}, "
                            f"error {host_rec(self.monitor, name).error}")
        return min(t for t in self.samples[name] if t > t0) - t0

    async def first_state_after(self, name: str, t0: float, states, timeout: float) -> float:
        await wait_for(lambda: any(t > t0 and s in states for t, s in self.states[name]), timeout,
                       what=f"{name} in {states}: state now {self.state(name)}")
        return min(t for t, s in self.states[name] if t > t0 and s in states) - t0

    def max_gap(self, name: str, since: float, until: float | None = None) -> float:
        """The longest time without a sample from `name` between since and until (now)."""
        until = time.monotonic() if until is None else until
        ts = [since] + [t for t in self.samples[name] if since <= t <= until] + [until]
        return max(b - a for a, b in zip(ts, ts[1:]))


def live_objects(*type_names: str) -> dict[str, int]:
    """How many objects of each named class are alive (after a full collection)."""
    gc.collect()
    counts = dict.fromkeys(type_names, 0)
    for obj in gc.get_objects():
        name = type(obj).__name__
        if name in counts:
            counts[name] += 1
    return counts


def other_tasks() -> list[asyncio.Task]:
    """The running loop's tasks except the caller's."""
    me = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not me and not t.done()]

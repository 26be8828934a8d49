"""A dead link to one host (blackholed relay, or that host's sshd frozen by SIGSTOP) is shown
within 10 s while the other hosts keep updating every second; restored, its data is back within 5 s.

Settings are a real fleet's sample rhythm (1 s samples, stale after 5 s: the defaults) with
a tight keepalive and reconnect cap, so a link that healed is retried within a second or two.
Each test prints the measured times.
"""

from __future__ import annotations

import asyncio
import time

from .fleet import DOWN_STATES, Watched, relayed_entry
from tests.core.helpers import host_entry

SETTINGS = dict(sample_interval=1.0, stale_after=5.0, connect_timeout=2, keepalive_interval=2,
                keepalive_count_max=2, reconnect_initial_delay=0.2, reconnect_max_delay=1.0)
DETECT_BOUND_S = 10.0
RECOVER_BOUND_S = 5.0


async def test_blackholed_host_is_shown_down_and_recovers(sshd_factory, ssh_env, relay_factory):
    a, b, c = sshd_factory(3)
    relay = relay_factory(a)
    hosts = [relayed_entry("cut", a, relay, ssh_env), host_entry(b), host_entry(c)]
    async with Watched(ssh_env, hosts, **SETTINGS) as w:
        await w.connected(["cut", b.name, c.name])
        await asyncio.sleep(1.5)
        t_cut = time.monotonic()
        relay.blackhole()
        detect = await w.first_state_after("cut", t_cut, DOWN_STATES, DETECT_BOUND_S + 2)
        # stay down a while: reconnect attempts into the blackhole fail and back off
        await asyncio.sleep(4.0)
        assert w.state("cut") in DOWN_STATES
        assert not any(t > t_cut + detect for t in w.samples["cut"])
        t_heal = time.monotonic()
        relay.pass_through()
        recover = await w.first_sample_after("cut", t_heal, RECOVER_BOUND_S + 10)
        await asyncio.sleep(1.0)
        gaps = {n: w.max_gap(n, t_cut) for n in (b.name, c.name)}
        first_down = next(s for t, s in w.states["cut"] if t > t_cut and s in DOWN_STATES)
        print(f"\nblackhole: shown {first_down!r} after {detect:.2f}s, data again "
              f"{recover:.2f}s after the link healed; other hosts' longest sample gap {gaps}")
    assert detect <= DETECT_BOUND_S
    assert recover <= RECOVER_BOUND_S
    # the others never stopped: 1 s samples, no gap past 2 s, never left "connected"
    for name, gap in gaps.items():
        assert gap < 2.0, (name, gap)
        assert {s for t, s in w.states[name] if t > t_cut} <= {"connected"}
    assert w.state("cut") == "connected"


async def test_frozen_sshd_is_shown_down_and_recovers(sshd_factory, ssh_env):
    a, b, c = sshd_factory(3)
    async with Watched(ssh_env, [host_entry(a), host_entry(b), host_entry(c)], **SETTINGS) as w:
        await w.connected([a.name, b.name, c.name])
        await asyncio.sleep(1.5)
        t_freeze = time.monotonic()
        a.freeze()  # SIGSTOP to the listener and the session's sshd: a peer that went silent
        try:
            detect = await w.first_state_after(a.name, t_freeze, DOWN_STATES, DETECT_BOUND_S + 2)
            await asyncio.sleep(4.0)
            assert w.state(a.name) in DOWN_STATES
        finally:
            t_thaw = time.monotonic()
            a.thaw()
        recover = await w.first_sample_after(a.name, t_thaw, RECOVER_BOUND_S + 10)
        await asyncio.sleep(1.0)
        gaps = {n: w.max_gap(n, t_freeze) for n in (b.name, c.name)}
        print(f"\nSIGSTOP sshd: shown down after {detect:.2f}s, data again {recover:.2f}s after SIGCONT; "
              f"other hosts' longest sample gap {gaps}")
    assert detect <= DETECT_BOUND_S
    assert recover <= RECOVER_BOUND_S
    for name, gap in gaps.items():
        assert gap < 2.0, (name, gap)
        assert {s for t, s in w.states[name] if t > t_freeze} <= {"connected"}

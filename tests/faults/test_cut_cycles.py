"""100 cut/restore cycles on one host's link (the relay aborts the TCP connection; both ends see
a reset): afterwards one probe on the host, one sshd session, no leaked connection, channel,
asyncio task or file descriptor on our side, and memory flat.

Memory bound: RSS is compared between cycle 10 (after warm-up: imports, asyncssh's caches and the
allocator's arenas are in place) and cycle 100. One cycle opens a new SSH connection (~150 KiB
of Python objects and buffers, with the probe's compressed bundle sent again): leaking one per
cycle would add well over 10 MiB across the 90 measured cycles, so growth must stay under 8 MiB.
Runtime: about 60-90 s on two cores (each cycle is a real SSH login and a new probe).
"""

from __future__ import annotations

import asyncio
import time

import psutil
import pytest

from .fleet import Watched, live_objects, other_tasks, relayed_entry
from tests.core.helpers import FAST_SETTINGS, host_entry, probes_on, wait_for

CYCLES = 100
WARMUP = 10
RSS_GROWTH_BOUND = 8 * 1024 * 1024
LEAK_TYPES = ("SSHClientConnection", "SSHClientChannel", "SshProbeLink", "SSHClientProcess")


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_hundred_cuts_leave_nothing_behind(sshd_factory, ssh_env, relay_factory):
    a, b = sshd_factory(2)
    relay = relay_factory(a)
    me = psutil.Process()
    async with Watched(ssh_env, [relayed_entry("cut", a, relay, ssh_env), host_entry(b)],
                       **FAST_SETTINGS) as w:
        await w.connected(["cut", b.name])
        session = w.monitor.sessions["cut"]
        await asyncio.sleep(0.5)
        tasks_before = len(other_tasks())
        objects_before = live_objects(*LEAK_TYPES)
        fds_before = me.num_fds()
        rss_warm = None
        t_start = time.monotonic()
        reconnect_s = []
        for cycle in range(1, CYCLES + 1):
            old_link = session.link
            t_cut = time.monotonic()
            relay.cut()
            # data again from a new connection: a frame in flight on the old one does not count
            await wait_for(lambda: session.link is not None and session.link is not old_link, 15,
                           interval=0.01, what=f"a new link in cycle {cycle}")
            t_new = time.monotonic()
            await w.first_sample_after("cut", t_new, 15)
            reconnect_s.append(max(w.samples["cut"]) - t_cut)
            if cycle == WARMUP:
                live_objects()  # collect before reading RSS
                rss_warm = me.memory_info().rss
                objects_warm = live_objects(*LEAK_TYPES)
        took = time.monotonic() - t_start
        await w.connected(["cut", b.name])
        await asyncio.sleep(1.0)  # let the last teardown finish
        tasks_after = len(other_tasks())
        objects_after = live_objects(*LEAK_TYPES)
        fds_after = me.num_fds()
        rss_end = me.memory_info().rss
        probes = probes_on(a)
        sessions = [p for p in a.sessions_processes()]
        b_gap = w.max_gap(b.name, t_start)
        reconnect_s.sort()
        print(f"\n{CYCLES} cuts in {took:.1f}s; reconnect median {reconnect_s[len(reconnect_s) // 2]:.2f}s "
              f"max {reconnect_s[-1]:.2f}s; tasks {tasks_before}->{tasks_after}; objects {objects_before}->"
              f"{objects_warm}->{objects_after}; fds {fds_before}->{fds_after}; RSS {rss_warm / 2**20:.1f}->{rss_end / 2**20:.1f} MiB "
              f"(cycle {WARMUP}->{CYCLES}); probes on host {len(probes)}; sshd processes {len(sessions)}; "
              f"other host's longest gap {b_gap:.2f}s; relay connections {relay.total_connections}")
    assert tasks_after <= tasks_before, (tasks_before, tasks_after)
    # Flat, not growing with the cycles: at most the one connection just cut may still be
    # referenced (by the exception that ended its session) when we count.
    for name in LEAK_TYPES:
        assert objects_after[name] <= objects_before[name] + 1, (name, objects_before, objects_after)
        assert objects_after[name] <= objects_warm[name] + 1, (name, objects_warm, objects_after)
    assert fds_after <= fds_before + 2, (fds_before, fds_after)
    assert rss_end - rss_warm < RSS_GROWTH_BOUND, (rss_warm, rss_end)
    assert len(probes) == 1, probes  # the live one, nothing from the 100 cut connections
    assert b_gap < 2.0
    assert relay.total_connections >= CYCLES + 1
    # after the monitor stopped, nothing of ours is left on the host
    await wait_for(lambda: not probes_on(a), 5, what="no probe after stop")

"""The real dashboard under three faults of one host among three real sshd hosts (one reached
through a relay): its sshd killed and restarted, its probe killed, its link slowed by 500 ms.

In each: the faulty host's line on the GPU grid and the summary bar show its true state, the
other hosts' samples stay fresh, and keys keep working (down, up, tab, shift+tab, enter, escape,
each checked on screen) with their key -> frame latency measured. The bound asserted here is
generous (two loaded cores run sshd, probes and the app); benchmarks/bench_faults_dashboard.py
measures the figure (issue: p95 under 100 ms).
"""

from __future__ import annotations

import asyncio
import time

from .dashboard_faults import (dashboard, host_line, key_round, percentile, sample_ages, summary,
                               wait_screen)
from .fleet import DOWN_STATES, relayed_entry
from tests.core.helpers import host_entry, probes_on

KEY_ROUNDS = 5  # x 6 keys = 30 presses per fault
# Generous for CI (two cores shared with sshd, probes and other work: at load 5 a single press was
# seen to wait a second for the CPU); the measured figure is in the benchmark.
P50_BOUND_S = 0.5
P95_BOUND_S = 3.0
FRESH_S = 2.5  # 1 s samples: an age past this means a host stopped updating
DOWN_LABELS = ("stale", "reconnecting", "unreachable")


def assert_fresh(app, names, during: str) -> None:
    ages = sample_ages(app, names)
    assert all(a is not None and a < FRESH_S for a in ages.values()), f"{during}: sample ages {ages}"


async def keys_while(app, clock, others, rounds: int = KEY_ROUNDS) -> list[tuple[str, float]]:
    lat = await key_round(app, clock, rounds)
    assert_fresh(app, others, "after the key presses")
    return lat


def check_latency(fault: str, presses: list[tuple[str, float]]) -> None:
    lat = [t for _, t in presses]
    slowest = sorted(presses, key=lambda kt: -kt[1])[:4]
    p50, p95 = percentile(lat, 0.5), percentile(lat, 0.95)
    print(f"\n{fault}: {len(lat)} keys, key->frame p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
          f"max {max(lat) * 1000:.0f} ms; slowest {[(k, round(t * 1000)) for k, t in slowest]}")
    assert p50 < P50_BOUND_S and p95 < P95_BOUND_S, (fault, p50, p95)


async def test_sshd_killed_and_restarted(sshd_factory, ssh_env, relay_factory):
    a, b, c = sshd_factory(3)
    relay = relay_factory(a)
    others = [b.name, c.name]
    async with dashboard(ssh_env, [relayed_entry("far", a, relay, ssh_env), host_entry(b), host_entry(c)]) as (
            app, pilot, log, clock):
        assert "connected" in host_line(app, "far")
        t_kill = time.monotonic()
        a.kill()  # listener and the session's sshd SIGKILLed: the connection dies, the probe is orphaned
        line = await wait_screen(pilot, lambda: any(s in host_line(app, "far") for s in DOWN_LABELS) and
                                 host_line(app, "far"), 10, "far shown down")
        shown_down = time.monotonic() - t_kill
        assert "far" in line and "connected" not in line.split("far", 1)[1].split("·")[0], line
        # the summary bar is redrawn on its own tick: it follows the host line within a second
        bar = await wait_screen(pilot, lambda: "2 connected" in summary(app) and summary(app), 2,
                                "the summary bar counts the host down")
        assert "reconnecting" in bar or "unreachable" in bar or "stale" in bar, bar
        lat = await keys_while(app, clock, others)  # keys while the host is down and being retried
        assert app.source.store.hosts["far"].state != "connected"
        t_up = time.monotonic()
        a.start()  # same address, port and host key
        await wait_screen(pilot, lambda: "3 connected" in summary(app), 10, f"far back: {summary(app)!r}")
        back = time.monotonic() - t_up
        await wait_screen(pilot, lambda: (sample_ages(app, ["far"])["far"] or 99) < FRESH_S, 5, "far fresh")
        assert "connected" in host_line(app, "far")
        assert set(log.since(b.name, t_kill)) <= {"connected"} and set(log.since(c.name, t_kill)) <= {"connected"}
        lat += await keys_while(app, clock, others + ["far"], 1)
        print(f"\nsshd killed: shown down after {shown_down:.2f}s, connected {back:.2f}s after sshd restarted")
    # the orphaned probe noticed its closed stdin and left
    deadline = time.monotonic() + 5
    while any(r.alive() for r in a.orphans) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not [r for r in a.orphans if r.alive()], a.orphans
    check_latency("sshd killed and restarted", lat)


async def test_probe_killed_on_a_host(sshd_factory, ssh_env, relay_factory):
    a, b, c = sshd_factory(3)
    relay = relay_factory(a)
    others = [a.name, c.name]
    hosts = [relayed_entry(a.name, a, relay, ssh_env), host_entry(b), host_entry(c)]
    async with dashboard(ssh_env, hosts) as (app, pilot, log, clock):
        (probe,) = probes_on(b)
        t_kill, wall_kill = time.monotonic(), time.time()
        probe.kill()  # psutil checks the pid still names the process it found
        probe.wait(5)
        # the session sees its channel end, says so, and starts a new probe
        await wait_screen(pilot, lambda: any(s != "connected" for s in log.since(b.name, t_kill)), 10,
                          f"{b.name} noticed its probe died")
        record = app.source.store.hosts[b.name]
        await wait_screen(pilot, lambda: record.state == "connected" and record.last_sample_time > wall_kill,
                          10, f"{b.name} sampling again: {record.state}")
        back = time.monotonic() - t_kill
        await wait_screen(pilot, lambda: "3 connected" in summary(app) and "connected" in host_line(app, b.name),
                          2, f"the screen shows {b.name} connected again: {summary(app)!r}")
        seen = log.since(b.name, t_kill)
        assert any(s in DOWN_STATES or s == "probe-failed" for s in seen), seen
        assert [p.pid for p in probes_on(b)] != [probe.pid]
        lat = await keys_while(app, clock, others + [b.name])
        assert len(probes_on(b)) == 1 and probes_on(b)[0].pid != probe.pid  # the new one only
        for name in others:
            assert set(log.since(name, t_kill)) <= {"connected"}
        print(f"\nprobe killed: states {seen}; fresh data again after {back:.2f}s")
    check_latency("probe killed", lat)


async def test_slow_host_behind_a_500ms_relay(sshd_factory, ssh_env, relay_factory):
    a, b, c = sshd_factory(3)
    relay = relay_factory(a)
    others = [b.name, c.name]
    async with dashboard(ssh_env, [relayed_entry("slow", a, relay, ssh_env), host_entry(b), host_entry(c)]) as (
            app, pilot, log, clock):
        t_slow = time.monotonic()
        relay.delay(0.5)  # every chunk, both ways, half a second late
        await asyncio.sleep(2.0)
        lat = await keys_while(app, clock, others)
        # slow is not dead: samples keep coming (late), the host stays connected, never called stale
        ages = sample_ages(app, ["slow"])
        assert ages["slow"] is not None and ages["slow"] < 3.0, ages
        assert set(log.since("slow", t_slow)) <= {"connected"}, log.since("slow", t_slow)
        assert "connected" in host_line(app, "slow") and "3 connected" in summary(app)
        assert relay.bytes_down > 0
    check_latency("host slowed by 500 ms", lat)

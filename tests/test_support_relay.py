"""Tests of the controllable TCP relay (tests/support/relay.py) in front of a real sshd."""

from __future__ import annotations

import asyncio
import socket
import time

import asyncssh
import pytest

from tests.support.relay import TcpRelay

pytestmark = pytest.mark.ssh


def _relay_kwargs(ssh_env, host, relay, **kw):
    return ssh_env.connect_kwargs(host, via=relay, **kw)


async def test_pass_blackhole_cut(sshd_factory, ssh_env, relay_factory):
    (host,) = sshd_factory(1)
    relay = relay_factory(host)
    assert relay.host == "127.0.0.1" and relay.mode == "pass"
    async with asyncssh.connect(**_relay_kwargs(ssh_env, host, relay)) as conn:
        r = await asyncio.wait_for(conn.run("echo via-relay", check=True), 10)
        assert r.stdout.strip() == "via-relay"
        assert relay.connection_count == 1
        relay.blackhole()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(conn.run("echo lost"), 1.0)
        assert relay.connection_count == 1  # still open: a blackhole never closes
        assert relay.bytes_dropped > 0
        relay.cut()
        await asyncio.wait_for(conn.wait_closed(), 5)
        assert relay.connection_count == 0
    relay.pass_through()
    async with asyncssh.connect(**_relay_kwargs(ssh_env, host, relay)) as conn:
        assert (await asyncio.wait_for(conn.run("echo again"), 10)).stdout.strip() == "again"


async def test_delay_and_stall(sshd_factory, ssh_env, relay_factory):
    (host,) = sshd_factory(1)
    relay = relay_factory(host)
    async with asyncssh.connect(**_relay_kwargs(ssh_env, host, relay)) as conn:
        t0 = time.monotonic()
        await conn.run("true")
        fast = time.monotonic() - t0
        relay.delay(0.2)
        t0 = time.monotonic()
        await asyncio.wait_for(conn.run("true"), 10)
        slow = time.monotonic() - t0
        assert slow >= 0.4 > fast  # session open + exec + close: at least two delayed round trips
        relay.stall()
        task = asyncio.ensure_future(conn.run("echo healed"))
        await asyncio.sleep(0.6)
        assert not task.done()
        relay.pass_through()  # the link heals, nothing was lost
        r = await asyncio.wait_for(task, 10)
        assert r.stdout.strip() == "healed"


async def test_refuse(sshd_factory, ssh_env, relay_factory):
    (host,) = sshd_factory(1)
    relay = relay_factory(host)
    relay.refuse()
    with pytest.raises((OSError, asyncssh.Error)):
        await asyncio.wait_for(asyncssh.connect(**_relay_kwargs(ssh_env, host, relay)), 5)


def test_sync_use_with_plain_sockets(sshd_factory):
    """The relay is usable from a sync test: read the sshd banner, then blackhole."""
    (host,) = sshd_factory(1)
    with TcpRelay(host.address, host.port) as relay:
        with socket.create_connection((relay.host, relay.port), timeout=5) as s:
            assert s.makefile("rb").readline().startswith(b"SSH-2.0-OpenSSH")
        relay.blackhole()
        with socket.create_connection((relay.host, relay.port), timeout=5) as s:
            s.settimeout(0.5)
            with pytest.raises(socket.timeout):
                s.recv(100)
        relay.cut()
    assert relay.connection_count == 0

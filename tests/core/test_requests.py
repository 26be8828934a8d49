"""Requests from the core to hosts: real sshd hosts, the local probe, real links cut and blackholed."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import psutil
import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.requests import RequestError

from .helpers import host_entry, host_rec, make_config, wait_for
from .proctree import ProcTree, start_ticks


@pytest.fixture
def tree():
    t = ProcTree()
    yield t
    t.stop()


def local_monitor() -> Monitor:
    return Monitor(parse_config({"settings": {"sample_interval": 0.2},
                                 "hosts": [{"name": "me", "local": True}]}, "t.toml"))


async def settled_connected(monitor: Monitor, names: list[str], timeout: float = 15.0) -> None:
    await wait_for(lambda: all(host_rec(monitor, n).state == "connected" for n in names), timeout,
                   what=f"{names} connected: " + str({n: host_rec(monitor, n).error for n in names}))


async def test_proc_tree_through_ssh_and_locally(sshd_factory, ssh_env, tree):
    (a,) = sshd_factory(1)
    cfg = make_config(ssh_env, [host_entry(a), {"name": "me", "local": True}])
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await settled_connected(monitor, [a.name, "me"])
        parent = tree.pids[0]
        args = {"pid": parent, "start_ticks": start_ticks(parent)}
        # The test "host" is this machine seen over SSH: the same tree, both ways.
        for host in (a.name, "me"):
            result = await monitor.request(host, "proc_tree", args, timeout=10)
            assert [p["pid"] for p in result["processes"]] == tree.pids, host
        pong = await monitor.request("me", "ping", timeout=5)
        assert abs(pong["t"] - time.time()) < 5
        with pytest.raises(RequestError) as err:
            await monitor.request(a.name, "proc_tree", {"pid": parent, "start_ticks": args["start_ticks"] + 7})
        assert err.value.code == "reused" and not err.value.outcome_unknown
        with pytest.raises(RequestError) as err:
            await monitor.request("nowhere", "proc_tree", args)
        assert err.value.code == "unknown-host" and a.name in err.value.message
    finally:
        await monitor.stop()


async def test_unknown_op_is_an_error_and_the_host_keeps_streaming(sshd_factory, ssh_env):
    (a,) = sshd_factory(1)
    monitor = Monitor(make_config(ssh_env, [host_entry(a)]))
    await monitor.start()
    try:
        await settled_connected(monitor, [a.name])
        with pytest.raises(RequestError) as err:
            await monitor.request(a.name, "reticulate_splines", {"n": 3}, timeout=5)
        assert err.value.code == "unknown-op" and "proc_tree" in err.value.message
        with pytest.raises(RequestError) as err:
            await monitor.request(a.name, "proc_tree", {"pid": "one"}, timeout=5)
        assert err.value.code == "bad-args"
        with pytest.raises(RequestError) as err:  # not JSON: refused here, nothing sent
            await monitor.request(a.name, "proc_tree", {"pid": object()})
        assert err.value.code == "bad-args"
        before = host_rec(monitor, a.name).last_sample_time
        await wait_for(lambda: host_rec(monitor, a.name).last_sample_time > before + 0.5, 5, what="more samples")
        assert host_rec(monitor, a.name).state == "connected"
    finally:
        await monitor.stop()


async def test_many_concurrent_requests_get_their_own_replies(sshd_factory, ssh_env):
    (a,) = sshd_factory(1)
    trees = [ProcTree(depth=1) for _ in range(5)]
    monitor = Monitor(make_config(ssh_env, [host_entry(a)]))
    await monitor.start()
    try:
        await settled_connected(monitor, [a.name])
        refs = [(t.pids[0], start_ticks(t.pids[0])) for t in trees]
        asked = [refs[i % len(refs)] for i in range(40)]
        results = await asyncio.gather(*(
            monitor.request(a.name, "proc_tree", {"pid": pid, "start_ticks": ticks}, timeout=20)
            for pid, ticks in asked))
        for (pid, _), result in zip(asked, results):
            assert result["root"] == pid and len(result["processes"]) == 2
    finally:
        await monitor.stop()
        for t in trees:
            t.stop()


async def test_request_to_a_host_that_is_down_fails_at_once(sshd_factory, ssh_env):
    from tests.support.net import free_port

    dead = {"name": "dead", "ssh": f"nobody@127.0.0.1:{free_port('127.0.0.1')}", "gpu_source": "nvidia-smi"}
    monitor = Monitor(make_config(ssh_env, [dead], reconnect_initial_delay=2, reconnect_max_delay=4))
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, "dead").state == "unreachable", 10, what="unreachable")
        t0 = time.monotonic()
        with pytest.raises(RequestError) as err:
            await monitor.request("dead", "proc_tree", {"pid": 1, "start_ticks": 0}, timeout=30)
        assert time.monotonic() - t0 < 0.5
        assert err.value.code == "host-down" and "unreachable" in err.value.message
        assert "refused" in err.value.message  # the reason, too
        # The retry delay is a field of its own in status JSON, besides the words.
        host = next(h for h in monitor.snapshot()["hosts"] if h["name"] == "dead")
        assert "retrying in" in host["error"]
        assert isinstance(host["retry_in_s"], float) and 0 <= host["retry_in_s"] <= 4
    finally:
        await monitor.stop()


async def test_blackholed_link_request_times_out_then_pending_fail_when_the_link_is_declared_dead(
        sshd_factory, ssh_env, relay_factory, tree):
    (a,) = sshd_factory(1)
    relay = relay_factory(a)
    entry = {"name": "relayed", "ssh": f"{a.user}@127.0.0.1:{relay.port}",
             "identity_file": str(ssh_env.identity_file), "gpu_source": "nvidia-smi"}
    monitor = Monitor(make_config(ssh_env, [entry]))
    await monitor.start()
    try:
        await settled_connected(monitor, ["relayed"])
        snap = next(h for h in monitor.snapshot()["hosts"] if h["name"] == "relayed")
        assert snap["retry_in_s"] is None  # connected: no retry planned
        args = {"pid": tree.pids[0], "start_ticks": start_ticks(tree.pids[0])}
        assert (await monitor.request("relayed", "proc_tree", args, timeout=5))["root"] == tree.pids[0]
        relay.blackhole()
        t0 = time.monotonic()
        short = asyncio.ensure_future(monitor.request("relayed", "proc_tree", args, timeout=1.0))
        long = asyncio.ensure_future(monitor.request("relayed", "proc_tree", args, timeout=60))
        with pytest.raises(RequestError) as err:
            await short
        assert err.value.code == "timeout" and "1s" in err.value.message and err.value.outcome_unknown
        assert 0.9 < time.monotonic() - t0 < 3.0
        # keepalive (1 s x 2 here) declares the link dead: what still waits fails then, not at 60 s
        with pytest.raises(RequestError) as err:
            await asyncio.wait_for(long, 15)
        assert err.value.code == "link-lost", err.value
        assert time.monotonic() - t0 < 15
        relay.pass_through()
        await settled_connected(monitor, ["relayed"], 20)
        assert (await monitor.request("relayed", "proc_tree", args, timeout=5))["root"] == tree.pids[0]
    finally:
        await monitor.stop()
        relay.cut()


async def test_cut_link_fails_pending_requests_at_once(sshd_factory, ssh_env, relay_factory):
    (a,) = sshd_factory(1)
    relay = relay_factory(a)
    entry = {"name": "relayed", "ssh": f"{a.user}@127.0.0.1:{relay.port}",
             "identity_file": str(ssh_env.identity_file), "gpu_source": "nvidia-smi"}
    monitor = Monitor(make_config(ssh_env, [entry], keepalive_interval=30))
    await monitor.start()
    try:
        await settled_connected(monitor, ["relayed"])
        relay.stall()  # requests go out, nothing comes back
        pending = [asyncio.ensure_future(monitor.request("relayed", "ping", timeout=60)) for _ in range(5)]
        await asyncio.sleep(0.3)
        assert not any(p.done() for p in pending)
        t0 = time.monotonic()
        relay.cut()
        done, _ = await asyncio.wait(pending, timeout=5)
        assert len(done) == 5 and time.monotonic() - t0 < 5
        assert {p.exception().code for p in pending} == {"link-lost"}
    finally:
        relay.pass_through()
        await monitor.stop()


async def test_local_probe_killed_fails_pending_then_the_restarted_one_answers(tree):
    monitor = local_monitor()
    await monitor.start()
    try:
        await settled_connected(monitor, ["me"])
        probe_pid = monitor.sessions["me"].link.proc.pid
        os.kill(probe_pid, signal.SIGSTOP)  # frozen: the request waits
        await wait_for(lambda: psutil.Process(probe_pid).status() == psutil.STATUS_STOPPED, 5,
                       what="the probe stopped")  # the stop lands asynchronously: wait for it
        assert monitor.sessions["me"].link.proc.pid == probe_pid  # the request goes to the frozen probe
        waiting = asyncio.ensure_future(monitor.request("me", "ping", timeout=60))
        await asyncio.sleep(0.3)
        assert not waiting.done(), waiting.result() if not waiting.exception() else waiting.exception()
        os.kill(probe_pid, signal.SIGKILL)
        with pytest.raises(RequestError) as err:
            await asyncio.wait_for(waiting, 5)
        assert err.value.code == "link-lost"
        await wait_for(lambda: monitor.sessions["me"].link is not None
                       and monitor.sessions["me"].link.proc.pid != probe_pid
                       and host_rec(monitor, "me").state == "connected", 10, what="probe restarted")
        args = {"pid": tree.pids[0], "start_ticks": start_ticks(tree.pids[0])}
        result = await monitor.request("me", "proc_tree", args, timeout=5)
        assert len(result["processes"]) == 3
    finally:
        await monitor.stop()


async def test_stop_fails_what_is_still_waiting():
    monitor = local_monitor()
    await monitor.start()
    stopped = False
    try:
        await settled_connected(monitor, ["me"])
        probe_pid = monitor.sessions["me"].link.proc.pid
        os.kill(probe_pid, signal.SIGSTOP)
        await wait_for(lambda: psutil.Process(probe_pid).status() == psutil.STATUS_STOPPED, 5,
                       what="the probe stopped")  # else it may still answer the ping below
        waiting = asyncio.ensure_future(monitor.request("me", "ping", timeout=60))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        t0 = time.monotonic()
        await monitor.stop()
        stopped = True
        with pytest.raises(RequestError) as err:
            await asyncio.wait_for(waiting, 1)
        assert err.value.code == "link-lost" and "stopped" in err.value.message
        assert time.monotonic() - t0 < 6
        with pytest.raises(RequestError) as err:
            await monitor.request("me", "ping", timeout=5)
        assert err.value.code == "host-down"
    finally:
        if not stopped:
            await monitor.stop()

"""SSH behaviour through the real asyncssh transport: ~/.ssh defaults, agent, timeouts, caps, backoff."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time

import pytest

from gpuwatch_tui.cli import build_parser
from gpuwatch_tui.config import Settings, parse_config
from gpuwatch_tui.feeds.hostsession import PING_EVERY_S, PROBE_IDLE_EXIT_S, HostSession
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.transport import ssh as ssh_transport

from .helpers import FAST_SETTINGS, host_entry, host_rec, make_config, probes_on, wait_for


async def _connected(monitor, names, timeout=15):
    await wait_for(lambda: all(host_rec(monitor, n).state == "connected" and host_rec(monitor, n).gpus for n in names),
                   timeout, what=str({n: (host_rec(monitor, n).state, host_rec(monitor, n).error) for n in names}))


async def test_minimal_form_through_home_ssh_config_and_known_hosts(sshd_factory, ssh_env, monkeypatch):
    """Only `name` and `ssh = alias`: HostName, Port, User, IdentityFile come from ~/.ssh/config and
    the key is checked against ~/.ssh/known_hosts (the defaults, under a throwaway HOME)."""
    (a,) = sshd_factory(1)
    monkeypatch.setenv("HOME", str(ssh_env.home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = parse_config({"settings": {"sample_interval": 0.2},
                        "hosts": [{"name": "trainer-a", "ssh": a.name}]}, "min.toml")
    assert cfg.settings.ssh_config == ("~/.ssh/config",) and cfg.settings.known_hosts == "~/.ssh/known_hosts"
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, "trainer-a").state == "connected", 15,
                       what=str(host_rec(monitor, "trainer-a").error))
        # no NVML on the test host: auto falls back to the fake nvidia-smi first on its PATH
        await wait_for(lambda: host_rec(monitor, "trainer-a").gpus, 5, what="gpus")
        assert host_rec(monitor, "trainer-a").gpu_source == "nvidia-smi"
    finally:
        await monitor.stop()


@pytest.mark.skipif(shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None, reason="no ssh-agent")
async def test_key_from_ssh_agent(sshd_factory, ssh_env, tmp_path, monkeypatch):
    (a,) = sshd_factory(1)
    empty_home = tmp_path / "home"
    (empty_home / ".ssh").mkdir(parents=True)
    shutil.copyfile(ssh_env.known_hosts, empty_home / ".ssh" / "known_hosts")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_for(sock.exists, 5, what="agent socket")
        env = dict(os.environ, SSH_AUTH_SOCK=str(sock))
        subprocess.run(["ssh-add", str(ssh_env.identity_file)], env=env, check=True, capture_output=True, timeout=10)
        monkeypatch.setenv("HOME", str(empty_home))  # no key files: only the agent has the key
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        cfg = parse_config({"settings": dict(FAST_SETTINGS),
                            "hosts": [{"name": "via-agent", "ssh": f"{a.user}@{a.address}:{a.port}",
                                       "gpu_source": "nvidia-smi"}]}, "agent.toml")
        monitor = Monitor(cfg)
        await monitor.start()
        try:
            await _connected(monitor, ["via-agent"])
        finally:
            await monitor.stop()
        # and without the agent the same host refuses us
        monkeypatch.delenv("SSH_AUTH_SOCK")
        monitor = Monitor(cfg)
        await monitor.start()
        try:
            await monitor.wait_settled(10)
            assert host_rec(monitor, "via-agent").state == "auth-failed"
        finally:
            await monitor.stop()
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(5)


async def test_frozen_host_times_out_others_fine(sshd_factory, ssh_env):
    a, b = sshd_factory(2)
    a.freeze()
    try:
        monitor = Monitor(make_config(ssh_env, [host_entry(a), host_entry(b)], connect_timeout=1))
        t0 = time.monotonic()
        await monitor.start()
        try:
            await _connected(monitor, [b.name])
            await wait_for(lambda: host_rec(monitor, a.name).state == "unreachable", 6, what="timeout")
            assert time.monotonic() - t0 < 4
            assert "timed out after 1s" in host_rec(monitor, a.name).error
        finally:
            await monitor.stop()
    finally:
        a.thaw()


async def test_concurrent_connects_capped(sshd_factory, ssh_env, monkeypatch):
    hosts = sshd_factory(4)
    real_connect = ssh_transport.asyncssh.connect
    in_flight = {"now": 0, "max": 0, "calls": 0}

    async def counting_connect(*args, **kw):
        in_flight["now"] += 1
        in_flight["calls"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        try:
            await asyncio.sleep(0.05)  # widen the window so overlap would show
            return await real_connect(*args, **kw)
        finally:
            in_flight["now"] -= 1

    monkeypatch.setattr(ssh_transport.asyncssh, "connect", counting_connect)
    monitor = Monitor(make_config(ssh_env, [host_entry(h) for h in hosts], max_concurrent_connects=2))
    await monitor.start()
    try:
        await _connected(monitor, [h.name for h in hosts])
    finally:
        await monitor.stop()
    assert in_flight["calls"] == 4 and in_flight["max"] == 2


def test_backoff_is_exponential_capped_and_jittered():
    settings = Settings(reconnect_initial_delay=1.0, reconnect_max_delay=8.0)
    session = HostSession(parse_config({"hosts": [{"name": "x", "ssh": "x"}]}, "b.toml").hosts[0], settings, None, None)
    assert session._backoff(0) < 0.5  # a link that just worked is retried at once
    for attempt, ceiling in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0), (12, 8.0)):
        values = [session._backoff(attempt) for _ in range(200)]
        assert all(0.5 * ceiling <= v <= ceiling for v in values), (attempt, min(values), max(values))
        assert max(values) - min(values) > 0.1 * ceiling  # jitter: not in lockstep


def test_probe_idle_exit_and_pings():
    # the probe gives up after 30 s without a word from us; we ping well inside that
    assert PROBE_IDLE_EXIT_S == 30.0 and PING_EVERY_S * 3 <= PROBE_IDLE_EXIT_S
    remote = HostSession(parse_config({"hosts": [{"name": "x", "ssh": "x"}]}, "b.toml").hosts[0], Settings(), None, None)
    local = HostSession(parse_config({"hosts": [{"name": "x", "local": True}]}, "b.toml").hosts[0], Settings(), None, None)
    assert remote._options()["idle_exit_s"] == 30.0
    assert local._options()["idle_exit_s"] == 0  # a local child sees its pipe close


async def test_bad_ssh_config_and_missing_identity_say_so(sshd_factory, ssh_env, tmp_path):
    a, b = sshd_factory(2)
    broken = tmp_path / "broken_config"
    broken.write_text(f"Host {a.name}\n    Port notanumber\n")
    missing = {"name": "nokey", "ssh": f"{b.user}@{b.address}:{b.port}", "identity_file": str(tmp_path / "nope")}
    monitor = Monitor(make_config(ssh_env, [missing, host_entry(b)]))
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        await _connected(monitor, [b.name])
        r = host_rec(monitor, "nokey")
        assert r.state == "auth-failed" and "identity file" in r.error and "not found" in r.error
    finally:
        await monitor.stop()
    monitor = Monitor(make_config(ssh_env, [host_entry(a)], ssh_config=[str(broken)]))
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        r = host_rec(monitor, a.name)
        assert r.state == "unreachable" and "ssh config error" in r.error and "notanumber" in r.error
    finally:
        await monitor.stop()


async def test_jump_host_killed_and_restarted(sshd_factory, ssh_env):
    jump, t1, t2 = sshd_factory(3)
    monitor = Monitor(make_config(ssh_env, [host_entry(t1, jump=jump.name), host_entry(t2, jump=jump.name)]))
    await monitor.start()
    try:
        await _connected(monitor, [t1.name, t2.name])
        jump.kill()
        await wait_for(lambda: all(host_rec(monitor, t.name).state == "unreachable" for t in (t1, t2)), 10,
                       what="targets unreachable")
        assert all(f"jump host {jump.name}" in host_rec(monitor, t.name).error for t in (t1, t2))
        jump.restart()
        await _connected(monitor, [t1.name, t2.name])
        # one new login on the restarted jump host, shared by both targets again
        log = jump.log_text()
        assert log[log.rindex("starting sshd"):].count("Accepted publickey") == 1
        assert len({id(s.channel.conn._tunnel) for s in monitor.sessions.values()}) == 1
    finally:
        await monitor.stop()
    for t in (t1, t2):
        await wait_for(lambda: not probes_on(t), 5, what="no probes left")


def test_config_flag_before_or_after_the_verb():
    p = build_parser()
    assert p.parse_args(["--config", "F", "status"]).config == "F"
    assert p.parse_args(["status", "--config", "G"]).config == "G"
    assert p.parse_args(["--config", "F", "watch", "--json"]).config == "F"
    assert p.parse_args([]).config is None


async def test_proxyjump_loop_in_ssh_config_is_reported(sshd_factory, ssh_env):
    a, b, c = sshd_factory(3)
    ssh_env.set_proxy_jump(a.name, b.name)
    ssh_env.set_proxy_jump(b.name, a.name)
    monitor = Monitor(make_config(ssh_env, [host_entry(a), host_entry(c)]))
    await monitor.start()
    try:
        await asyncio.wait_for(monitor.wait_settled(10), 12)
        await _connected(monitor, [c.name])
        r = host_rec(monitor, a.name)
        assert r.state == "unreachable" and "jump hosts loop" in r.error, (r.state, r.error)
    finally:
        await monitor.stop()

"""End to end through the real asyncssh transport, real OpenSSH sshd hosts and the real probe."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import psutil

from gpuwatch_tui.feeds import hostsession
from gpuwatch_tui.monitor import Monitor

from .helpers import host_entry, host_rec, make_config, probes_on, wait_for


class Recorder:
    """Every (host, state) change and every sample arrival the monitor reports."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.states: dict[str, list[str]] = {n: [] for n in monitor.sessions}
        self.samples: dict[str, list[float]] = {n: [] for n in monitor.sessions}
        orig_state, orig_sample = monitor.host_state, monitor.host_sample

        def host_state(host, state, error, hint, retry_at=None):
            self.states[host].append(state)
            orig_state(host, state, error, hint, retry_at)

        def host_sample(host, sample):
            self.samples[host].append(time.monotonic())
            orig_sample(host, sample)

        for s in monitor.sessions.values():
            s.sink = self
        self.host_state, self.host_sample = host_state, host_sample

    def max_gap(self, host: str, since: float) -> float:
        ts = [since] + [t for t in self.samples[host] if t >= since] + [time.monotonic()]
        return max(b - a for a, b in zip(ts, ts[1:]))


async def connected(monitor, names, timeout=15.0):
    await wait_for(
        lambda: all(host_rec(monitor, n).state == "connected" and host_rec(monitor, n).gpus or
                    (host_rec(monitor, n).state == "connected" and host_rec(monitor, n).gpu_source == "none")
                    for n in names),
        timeout, what=f"{names} connected with samples: "
        + str({n: (host_rec(monitor, n).state, host_rec(monitor, n).error) for n in names}),
    )


async def test_several_hosts_and_local_stream_at_once(sshd_factory, ssh_env):
    hosts = sshd_factory(3)
    hosts[0].set_scenario(gpus=2, phase="training", uuid_prefix="GPU-h2")
    hosts[1].set_scenario(gpus=1, phase="held", uuid_prefix="GPU-h3",
                          processes=[{"gpu": 0, "pid": 4242, "used_memory_mib": 520}])
    hosts[2].set_scenario(gpus=4, phase="idle", uuid_prefix="GPU-h4")
    cfg = make_config(ssh_env, [host_entry(h) for h in hosts] + [{"name": "me", "local": True}])
    monitor = Monitor(cfg)
    rec = Recorder(monitor)
    t0 = time.monotonic()
    await monitor.start()
    try:
        await connected(monitor, [h.name for h in hosts] + ["me"])
        first = time.monotonic() - t0
        n0 = {n: len(v) for n, v in rec.samples.items()}
        await asyncio.sleep(1.0)
        snap = monitor.snapshot()
        # every host keeps streaming (0.2 s interval: several samples each in 1 s)
        for n, v in rec.samples.items():
            assert len(v) - n0[n] >= 3, (n, len(v) - n0[n])
    finally:
        await monitor.stop()
    assert first < 10
    by = {h["name"]: h for h in snap["hosts"]}
    assert [g["uuid"] for g in by["host2"]["gpus"]] == ["GPU-h2-0", "GPU-h2-1"]
    g0 = by["host2"]["gpus"][0]  # the recording: GPU 0 training, the other idle
    assert g0["util_pct"] >= 90 and g0["power_w"] > 600 and g0["mem_total_mib"] == 143771
    assert [g["uuid"] for g in by["host3"]["gpus"]] == ["GPU-h3-0"]
    assert by["host3"]["gpus"][0]["processes"] == [{"pid": 4242, "mem_used_mib": 520}]
    assert len(by["host4"]["gpus"]) == 4 and all(g["util_pct"] == 0 for g in by["host4"]["gpus"])
    for name in ("host2", "host3", "host4"):
        assert by[name]["state"] == "connected" and by[name]["error"] is None
        assert by[name]["gpu_source"] == "nvidia-smi"
        assert by[name]["last_sample_age_s"] < 1.0
    # the local machine is a host too, through the same probe as a local subprocess
    assert by["me"]["state"] == "connected" and by["me"]["gpu_source"] in ("none", "nvml", "nvidia-smi")
    assert by["me"]["last_sample_age_s"] < 1.0
    # one probe process per host, on one channel, none left afterwards
    for h in hosts:
        await wait_for(lambda: not probes_on(h), 5, what=f"no probe left on {h.name}")


async def test_local_host_probe_is_a_child_process_and_exits(tmp_path):
    from gpuwatch_tui.config import parse_config

    cfg = parse_config({"settings": {"sample_interval": 0.2},
                        "hosts": [{"name": "me", "local": True, "env": {"GPUWATCH_LOCAL_MARK": "x1"}}]}, "t.toml")
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, "me").last_sample_time, 10, what="local sample")
        link = monitor.sessions["me"].link
        pid = link.proc.pid
        p = psutil.Process(pid)
        assert p.ppid() == os.getpid()
        assert p.environ().get("GPUWATCH_LOCAL_MARK") == "x1"
    finally:
        await monitor.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_sshd_killed_then_restarted_reconnects_others_unaffected(sshd_factory, ssh_env):
    a, b = sshd_factory(2)
    cfg = make_config(ssh_env, [host_entry(a), host_entry(b)])
    monitor = Monitor(cfg)
    rec = Recorder(monitor)
    await monitor.start()
    try:
        await connected(monitor, [a.name, b.name])
        old_probe = probes_on(a)
        assert len(old_probe) == 1
        t_kill = time.monotonic()
        a.kill()
        await wait_for(lambda: host_rec(monitor, a.name).state in ("reconnecting", "unreachable"), 10,
                       what="host2 noticed the dead sshd")
        await wait_for(lambda: host_rec(monitor, a.name).state == "unreachable", 10, what="host2 unreachable")
        assert "refused" in host_rec(monitor, a.name).error
        await asyncio.sleep(1.0)  # a while down, retrying
        assert host_rec(monitor, a.name).state == "unreachable"
        # the orphaned probe noticed its stdin closing and left
        await wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in old_probe),
                       5, what="old probe gone")
        a.restart()
        t_restart = time.monotonic()
        await wait_for(lambda: host_rec(monitor, a.name).state == "connected", 10, what="host2 reconnected")
        reconnect_s = time.monotonic() - t_restart
        n = len(rec.samples[a.name])
        await wait_for(lambda: len(rec.samples[a.name]) > n + 2, 5, what="host2 samples again")
        # the other host never stopped: connected all along, no gap in its samples
        assert set(rec.states[b.name]) <= {"connecting", "connected"}
        assert rec.max_gap(b.name, t_kill) < 2.0
        assert host_rec(monitor, a.name).reconnects >= 1
        assert reconnect_s < 5
        assert len(probes_on(a)) == 1
    finally:
        await monitor.stop()


async def test_wrong_key_is_auth_failed_others_keep_working(sshd_factory, ssh_env, ssh_keys):
    a, b = sshd_factory(2)
    bad = {"name": "badkey", "ssh": f"{a.user}@{a.address}:{a.port}",
           "identity_file": str(ssh_keys.wrong_private_key), "gpu_source": "nvidia-smi"}
    cfg = make_config(ssh_env, [bad, host_entry(b)])
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        await connected(monitor, [b.name])
        r = host_rec(monitor, "badkey")
        assert r.state == "auth-failed", (r.state, r.error)
        assert "authentication" in r.error.lower()
        assert r.gpus == {} and r.last_sample_time is None
        await asyncio.sleep(0.8)
        assert host_rec(monitor, "badkey").state == "auth-failed"  # stays so while retrying
    finally:
        await monitor.stop()
    assert not probes_on(a)


async def test_unknown_and_changed_host_key(sshd_factory, ssh_env, tmp_path):
    from tests.support.sshd import write_known_hosts

    a, b, c = sshd_factory(3)
    # only c is trusted; a is unknown; b's entry holds a's key (as if b's key changed)
    kh = write_known_hosts(tmp_path / "known_hosts", [c, (b.address, b.port, a)], aliases=False)
    hosts = [
        {"name": "unknown", "ssh": f"{a.user}@{a.address}:{a.port}", "identity_file": str(ssh_env.identity_file)},
        {"name": "changed", "ssh": f"{b.user}@{b.address}:{b.port}", "identity_file": str(ssh_env.identity_file)},
        {"name": "good", "ssh": f"{c.user}@{c.address}:{c.port}", "identity_file": str(ssh_env.identity_file),
         "gpu_source": "nvidia-smi"},
    ]
    cfg = make_config(ssh_env, hosts, known_hosts=str(kh))
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        await connected(monitor, ["good"])
        snap = monitor.snapshot()
        u, ch = host_rec(monitor, "unknown"), host_rec(monitor, "changed")
        assert u.state == "host-key-unknown", (u.state, u.error)
        assert a.host_key_fingerprint in u.error
        assert "ssh-keyscan" in u.hint and str(a.port) in u.hint and str(kh) in u.hint
        assert ch.state == "host-key-changed", (ch.state, ch.error)
        assert b.host_key_fingerprint in ch.error
        assert "ssh-keygen -R" in ch.hint
        for r in (u, ch):
            assert r.gpus == {} and r.last_sample_time is None
        by = {h["name"]: h for h in snap["hosts"]}
        assert by["unknown"]["gpus"] == [] and by["changed"]["gpus"] == []
        await asyncio.sleep(0.8)
        assert (host_rec(monitor, "unknown").state, host_rec(monitor, "changed").state) == (
            "host-key-unknown", "host-key-changed")
    finally:
        await monitor.stop()
    # no data taken: never logged in (the key check fails before authentication)
    for h in (a, b):
        assert "Accepted publickey" not in h.log_text()
        assert not probes_on(h)


async def test_probe_killed_on_host_is_restarted(sshd_factory, ssh_env):
    (a,) = sshd_factory(1)
    cfg = make_config(ssh_env, [host_entry(a)])
    monitor = Monitor(cfg)
    rec = Recorder(monitor)
    await monitor.start()
    try:
        await connected(monitor, [a.name])
        (probe,) = probes_on(a)
        probe.send_signal(signal.SIGKILL)
        await wait_for(lambda: [p for p in probes_on(a) if p.pid != probe.pid], 10, what="a new probe")
        await wait_for(lambda: host_rec(monitor, a.name).state == "connected", 10, what="connected again")
        n = len(rec.samples[a.name])
        await wait_for(lambda: len(rec.samples[a.name]) > n + 2, 5, what="samples again")
        assert len(probes_on(a)) == 1
        assert "probe-failed" not in rec.states[a.name]
    finally:
        await monitor.stop()


async def test_cut_connection_leaves_no_probe_and_reconnects(sshd_factory, ssh_env, relay_factory):
    (a,) = sshd_factory(1)
    relay = relay_factory(a)
    entry = {"name": "relayed", "ssh": f"{a.user}@127.0.0.1:{relay.port}",
             "identity_file": str(ssh_env.identity_file), "gpu_source": "nvidia-smi"}
    monitor = Monitor(make_config(ssh_env, [entry]))
    await monitor.start()
    try:
        await connected(monitor, ["relayed"])
        (probe,) = probes_on(a)
        relay.cut()
        await wait_for(lambda: not probe.is_running() or probe.status() == psutil.STATUS_ZOMBIE, 5,
                       what="probe gone after the cut")
        await wait_for(lambda: [p for p in probes_on(a) if p.pid != probe.pid], 10, what="reconnected probe")
        await wait_for(lambda: host_rec(monitor, "relayed").state == "connected", 10, what="connected again")
    finally:
        await monitor.stop()
    await wait_for(lambda: not probes_on(a), 5, what="no probe after stop")


async def test_blackholed_connection_probe_exits_on_its_own(sshd_factory, ssh_env, relay_factory, monkeypatch):
    # The real values are 5 s pings / 30 s idle exit; shortened here so the test stays quick.
    monkeypatch.setattr(hostsession, "PING_EVERY_S", 0.5)
    monkeypatch.setattr(hostsession, "PROBE_IDLE_EXIT_S", 3.0)
    (a,) = sshd_factory(1)
    relay = relay_factory(a)
    entry = {"name": "relayed", "ssh": f"{a.user}@127.0.0.1:{relay.port}",
             "identity_file": str(ssh_env.identity_file), "gpu_source": "nvidia-smi"}
    monitor = Monitor(make_config(ssh_env, [entry]))
    await monitor.start()
    try:
        await connected(monitor, ["relayed"])
        await asyncio.sleep(4.0)  # pings keep the probe alive past its idle limit
        (probe,) = probes_on(a)
        relay.blackhole()
        # the client sees no frames: stale within stale_after, then keepalive gives up
        await wait_for(lambda: host_rec(monitor, "relayed").state == "stale", 5, what="stale")
        await wait_for(lambda: host_rec(monitor, "relayed").state in ("reconnecting", "unreachable"), 10,
                       what="link given up")
        # the host side never saw the connection close: the probe leaves by itself (no pings)
        t0 = time.monotonic()
        await wait_for(lambda: not probe.is_running() or probe.status() == psutil.STATUS_ZOMBIE, 10,
                       what="blackholed probe exits")
        assert time.monotonic() - t0 < 6
        assert relay.connection_count >= 1  # the blackholed TCP connection itself is still open
        relay.pass_through()
        await wait_for(lambda: host_rec(monitor, "relayed").state == "connected", 15, what="healed")
    finally:
        await monitor.stop()
        relay.cut()  # drop the dead connection so its sshd session ends
    await wait_for(lambda: not probes_on(a), 5, what="no probe after stop")


async def test_jump_host_shared_connection(sshd_factory, ssh_env):
    jump, t1, t2 = sshd_factory(3)
    hosts = [host_entry(t1, jump=jump.name), host_entry(t2, jump=jump.name)]
    monitor = Monitor(make_config(ssh_env, hosts))
    await monitor.start()
    try:
        await connected(monitor, [t1.name, t2.name])
        sessions = monitor.sessions
        tunnels = {id(s.channel.conn._tunnel) for s in sessions.values()}
        assert len(tunnels) == 1
        # one login on the jump host for both targets, and no probe there
        assert jump.log_text().count("Accepted publickey") == 1
        assert not probes_on(jump)
        assert len(probes_on(t1)) == 1 and len(probes_on(t2)) == 1
    finally:
        await monitor.stop()


async def test_proxyjump_in_ssh_config_is_shared(sshd_factory, ssh_env):
    jump, t1, t2 = sshd_factory(3)
    ssh_env.set_proxy_jump(t1.name, jump.name)
    ssh_env.set_proxy_jump(t2.name, jump.name)
    monitor = Monitor(make_config(ssh_env, [host_entry(t1), host_entry(t2)]))
    await monitor.start()
    try:
        await connected(monitor, [t1.name, t2.name])
        assert jump.log_text().count("Accepted publickey") == 1
    finally:
        await monitor.stop()


async def test_command_prefix_and_env_reach_the_probe_literally(sshd_factory, ssh_env, tmp_path):
    (a,) = sshd_factory(1)
    wrapper = a.bin_dir / "gpuwatch-wrap"
    seen = tmp_path / "wrapper-ran"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {seen}\nexec "$@"\n')
    wrapper.chmod(0o755)
    pwned = tmp_path / "pwned"
    hostile = f"$(touch {pwned})`touch {pwned}`;touch {pwned}"
    entry = host_entry(a, prefix=f"{wrapper} env GPUWATCH_PREFIX_SEEN=1",
                       env={"GPUWATCH_HOSTILE": hostile, "GPUWATCH_PLAIN": "a b  c"})
    monitor = Monitor(make_config(ssh_env, [entry]))
    await monitor.start()
    try:
        await connected(monitor, [a.name])
        (probe,) = probes_on(a)
        env = probe.environ()
        assert env.get("GPUWATCH_PREFIX_SEEN") == "1"
        assert env.get("GPUWATCH_HOSTILE") == hostile
        assert env.get("GPUWATCH_PLAIN") == "a b  c"
        assert seen.exists() and "python3 -c" in seen.read_text()
        assert not pwned.exists()
    finally:
        await monitor.stop()
    assert not pwned.exists()


async def test_bad_python_is_probe_failed(sshd_factory, ssh_env):
    a, b = sshd_factory(2)
    monitor = Monitor(make_config(ssh_env, [host_entry(a, python="/nonexistent/python9"), host_entry(b)]))
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        await connected(monitor, [b.name])
        r = host_rec(monitor, a.name)
        assert r.state == "probe-failed", (r.state, r.error)
        assert "python9" in r.error
    finally:
        await monitor.stop()


async def test_unreachable_host_says_so(sshd_factory, ssh_env):
    (b,) = sshd_factory(1)
    from tests.support.net import free_port

    port = free_port("127.0.0.9")
    entry = {"name": "down", "ssh": f"{b.user}@127.0.0.9:{port}", "identity_file": str(ssh_env.identity_file)}
    monitor = Monitor(make_config(ssh_env, [entry, host_entry(b)]))
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        await connected(monitor, [b.name])
        r = host_rec(monitor, "down")
        assert r.state == "unreachable" and "refused" in r.error
    finally:
        await monitor.stop()


async def test_protocol_mismatch_is_probe_failed(sshd_factory, ssh_env, monkeypatch):
    (a,) = sshd_factory(1)
    monkeypatch.setattr(hostsession, "PROTOCOL_VERSION", 99)
    monitor = Monitor(make_config(ssh_env, [host_entry(a)]))
    await monitor.start()
    try:
        await monitor.wait_settled(10)
        r = host_rec(monitor, a.name)
        assert r.state == "probe-failed" and "protocol 1, expected 99" in r.error
        assert r.gpus == {}
    finally:
        await monitor.stop()
    await wait_for(lambda: not probes_on(a), 5, what="no probe left")


async def test_local_host_with_prefix_and_env(tmp_path):
    """A local host through a prefix: the env crosses it as words, literally."""
    from gpuwatch_tui.config import parse_config

    pwned = tmp_path / "pwned"
    hostile = f"$(touch {pwned});touch {pwned}"
    cfg = parse_config({"settings": {"sample_interval": 0.2}, "hosts": [{
        "name": "me", "local": True, "prefix": ["env", "GPUWATCH_PREFIX_SEEN=1"],
        "python": sys.executable, "env": {"GPUWATCH_HOSTILE": hostile}}]}, "t.toml")
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, "me").state == "connected", 10, what="local via prefix")
        env = psutil.Process(monitor.sessions["me"].link.proc.pid).environ()
        assert env["GPUWATCH_PREFIX_SEEN"] == "1" and env["GPUWATCH_HOSTILE"] == hostile
    finally:
        await monitor.stop()
    assert not pwned.exists()


async def test_stopped_probe_makes_host_stale_then_recovers(sshd_factory, ssh_env):
    a, b = sshd_factory(2)
    monitor = Monitor(make_config(ssh_env, [host_entry(a), host_entry(b)]))
    rec = Recorder(monitor)
    await monitor.start()
    try:
        await connected(monitor, [a.name, b.name])
        (probe,) = probes_on(a)
        probe.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            await wait_for(lambda: host_rec(monitor, a.name).state == "stale", 5, what="stale")
            assert time.monotonic() - t0 >= 0.8  # stale_after = 1 s
            assert host_rec(monitor, a.name).error.startswith("no sample for ")
            assert host_rec(monitor, b.name).state == "connected"
            assert rec.max_gap(b.name, t0) < 2.0
        finally:
            probe.send_signal(signal.SIGCONT)
        await wait_for(lambda: host_rec(monitor, a.name).state == "connected", 5, what="fresh again")
        assert host_rec(monitor, a.name).error is None
        assert [p.pid for p in probes_on(a)] == [probe.pid]  # the same probe, it was only paused
    finally:
        await monitor.stop()


async def test_local_host_with_missing_interpreter_is_probe_failed(tmp_path):
    from gpuwatch_tui.config import parse_config

    cfg = parse_config({"settings": {"sample_interval": 0.2, "reconnect_max_delay": 0.5}, "hosts": [
        {"name": "nopy", "local": True, "python": str(tmp_path / "no-python")},
        {"name": "badprefix", "local": True, "prefix": [str(tmp_path / "no-wrapper")]},
        {"name": "me", "local": True}]}, "t.toml")
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await asyncio.wait_for(monitor.wait_settled(10), 12)
        await wait_for(lambda: host_rec(monitor, "me").state == "connected", 5, what="me connected")
        for name, word in (("nopy", "no-python"), ("badprefix", "no-wrapper")):
            r = host_rec(monitor, name)
            assert r.state == "probe-failed", (name, r.state, r.error)
            assert word in r.error and "No such file" in r.error
    finally:
        await monitor.stop()


async def test_stop_does_not_hang_on_a_blackholed_host(sshd_factory, ssh_env, relay_factory):
    a, b = sshd_factory(2)
    relay = relay_factory(a)
    entry = {"name": "relayed", "ssh": f"{a.user}@127.0.0.1:{relay.port}",
             "identity_file": str(ssh_env.identity_file), "gpu_source": "nvidia-smi"}
    monitor = Monitor(make_config(ssh_env, [entry, host_entry(b)], keepalive_interval=30))
    await monitor.start()
    try:
        await connected(monitor, ["relayed", b.name])
        relay.blackhole()
        await wait_for(lambda: host_rec(monitor, "relayed").state == "stale", 5, what="stale")
    finally:
        t0 = time.monotonic()
        await monitor.stop()
        took = time.monotonic() - t0
        relay.cut()
    assert took < 2.0
    await wait_for(lambda: not probes_on(a) and not probes_on(b), 5, what="no probe left")

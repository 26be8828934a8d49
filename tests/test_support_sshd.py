"""Tests of the sshd test-host support code (tests/support/sshd.py) against real OpenSSH."""

from __future__ import annotations

import asyncio
import subprocess

import asyncssh
import psutil
import pytest

from tests.support.fake_smi_scenario import write_placeholder_recordings
from tests.support.sshd import write_known_hosts

pytestmark = pytest.mark.ssh

GPU_QUERY = (
    "nvidia-smi --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,"
    "temperature.gpu,power.draw,power.limit,clocks.sm --format=csv,noheader,nounits"
)


@pytest.fixture
def smi_data(tmp_path):
    return write_placeholder_recordings(tmp_path / "smi-data")


async def _run(conn, cmd, timeout=10):
    return await asyncio.wait_for(conn.run(cmd, check=True), timeout)


async def test_two_hosts_env_and_fake_smi(sshd_factory, ssh_env, smi_data):
    a, b = sshd_factory(2)
    assert (a.address, b.address) == ("127.0.0.2", "127.0.0.3")
    assert a.port != b.port
    assert a.host_key_fingerprint != b.host_key_fingerprint
    a.set_scenario(gpus=2, phase="training", uuid_prefix="GPU-test-host2", data_dir=str(smi_data))
    b.set_scenario(gpus=1, phase="idle", uuid_prefix="GPU-test-host3", data_dir=str(smi_data))
    for host, expect in ((a, ["0, GPU-test-host2-0", "1, GPU-test-host2-1"]), (b, ["0, GPU-test-host3-0"])):
        async with await ssh_env.connect(host) as conn:
            r = await _run(conn, f"echo $PATH; echo $GPUWATCH_FAKE_SMI; command -v nvidia-smi; {GPU_QUERY}")
        lines = r.stdout.splitlines()
        assert lines[0].split(":")[0] == str(host.bin_dir)
        assert lines[0].endswith(":/usr/local/bin:/usr/bin:/bin")
        assert lines[1] == str(host.scenario_path)
        assert lines[2] == str(host.bin_dir / "nvidia-smi")
        rows = lines[3:]
        assert [r[: len(e)] for r, e in zip(rows, expect)] == expect and len(rows) == len(expect)
        assert all(len(r.split(", ")) == 10 for r in rows)
    # the fingerprint matches what OpenSSH itself computes
    out = subprocess.run(["ssh-keygen", "-lf", f"{a.host_key_path}.pub"], capture_output=True, text=True, check=True)
    assert a.host_key_fingerprint in out.stdout
    assert "Accepted publickey" in a.log_text()


async def test_alias_through_ssh_config_and_cli(sshd_factory, ssh_env):
    (host,) = sshd_factory(1)
    async with await ssh_env.connect(host.name) as conn:
        r = await _run(conn, "echo ok-$GPUWATCH_TEST_SSHD")
    assert r.stdout.strip() == f"ok-{host.marker}"
    # the OpenSSH client accepts the same files
    cli = subprocess.run(
        ["ssh", "-F", str(ssh_env.ssh_config), host.name, "echo cli-ok"],
        capture_output=True, text=True, timeout=20, env=ssh_env.environ(),
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == "cli-ok"


async def test_set_env_applies_to_new_logins(sshd_factory, ssh_env):
    (host,) = sshd_factory(1, env={"GPUWATCH_EXTRA": "one"})
    async with await ssh_env.connect(host) as conn:
        assert (await _run(conn, "echo $GPUWATCH_EXTRA")).stdout.strip() == "one"
    host.set_env(GPUWATCH_EXTRA='two "quoted"')
    async with await ssh_env.connect(host) as conn:
        assert (await _run(conn, "echo $GPUWATCH_EXTRA")).stdout.strip() == 'two "quoted"'


async def test_wrong_key_is_denied(sshd_factory, ssh_env, ssh_keys):
    (host,) = sshd_factory(1)
    with pytest.raises(asyncssh.PermissionDenied):
        await asyncio.wait_for(
            asyncssh.connect(**host.connect_kwargs(ssh_env.known_hosts, client_keys=[str(ssh_keys.wrong_private_key)])),
            10,
        )


async def test_unknown_host_key_is_rejected(sshd_factory, ssh_env, tmp_path):
    a, b = sshd_factory(2)
    only_a = write_known_hosts(tmp_path / "known_hosts", [a])
    async with asyncssh.connect(**a.connect_kwargs(only_a)) as conn:
        await _run(conn, "true")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        await asyncio.wait_for(asyncssh.connect(**b.connect_kwargs(only_a)), 10)
    # and a host whose key changed (b's key listed for a's address) is rejected too
    wrong = write_known_hosts(tmp_path / "kh2", [(a.address, a.port, b)])
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        await asyncio.wait_for(asyncssh.connect(**a.connect_kwargs(wrong)), 10)


async def test_jump_host(sshd_factory, ssh_env):
    jump, target = sshd_factory(2)
    async with await ssh_env.connect(jump) as jconn:
        async with asyncssh.connect(**target.connect_kwargs(ssh_env.known_hosts, tunnel=jconn)) as conn:
            r = await _run(conn, "echo $GPUWATCH_TEST_SSHD")
    assert r.stdout.strip() == target.marker
    assert "direct-tcpip" in jump.log_text() or "Connection from" in target.log_text()
    # and through the ssh config's ProxyJump
    ssh_env.set_proxy_jump(target.name, jump.name)
    async with await ssh_env.connect(target.name) as conn:
        r = await _run(conn, "echo via-config")
    assert r.stdout.strip() == "via-config"


async def test_kill_and_restart(sshd_factory, ssh_env):
    (host,) = sshd_factory(1)
    port, fp = host.port, host.host_key_fingerprint
    conn = await ssh_env.connect(host)
    await conn.create_process("sleep 60")
    await asyncio.sleep(0.3)
    sleepers = [p for p in host.user_processes() if p.name() == "sleep"]
    assert len(sleepers) == 1
    host.kill(user_processes=True)
    # the established connection really dies
    await asyncio.wait_for(conn.wait_closed(), 10)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in sleepers)
    with pytest.raises(OSError):
        await asyncio.wait_for(ssh_env.connect(host), 10)
    host.restart()
    assert (host.port, host.host_key_fingerprint) == (port, fp)
    async with await ssh_env.connect(host) as conn2:
        assert (await _run(conn2, "echo back")).stdout.strip() == "back"


async def test_kill_leaves_user_processes_to_notice_eof(sshd_factory, ssh_env):
    """kill() only kills sshd processes; a session process that reads stdin sees EOF and exits."""
    (host,) = sshd_factory(1)
    conn = await ssh_env.connect(host)
    await conn.create_process("cat")
    await asyncio.sleep(0.3)
    assert [p.name() for p in host.user_processes()] == ["cat"]
    host.kill()
    await asyncio.wait_for(conn.wait_closed(), 10)
    deadline = asyncio.get_running_loop().time() + 5
    while host.marked_processes():
        assert asyncio.get_running_loop().time() < deadline, host.marked_processes()
        await asyncio.sleep(0.05)


async def test_freeze_and_thaw(sshd_factory, ssh_env):
    (host,) = sshd_factory(1)
    async with await ssh_env.connect(host) as conn:
        await _run(conn, "true")
        host.freeze()
        assert host.frozen
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(conn.run("echo frozen"), 1.0)
        with pytest.raises((asyncio.TimeoutError, OSError, asyncssh.Error)):
            await asyncio.wait_for(ssh_env.connect(host), 1.0)
        host.thaw()
        assert (await _run(conn, "echo thawed")).stdout.strip() == "thawed"


async def test_sessions_processes_and_max_sessions(sshd_factory, ssh_env):
    (host,) = sshd_factory(1, max_sessions=2)
    async with await ssh_env.connect(host) as conn:
        await conn.create_process("cat")
        await conn.create_process("cat")
        with pytest.raises(asyncssh.ChannelOpenError):
            await asyncio.wait_for(conn.create_process("cat"), 10)
        await asyncio.sleep(0.2)
        names = [p.name() for p in host.sessions_processes()]
        assert names.count("cat") == 2 and any(n.startswith("sshd") for n in names)
    # cat exits on EOF once the connection is gone; the fixture checks that nothing leaked


async def test_restart_keeping_sessions(sshd_factory, ssh_env):
    (host,) = sshd_factory(1)
    async with await ssh_env.connect(host) as conn:
        await _run(conn, "true")
        host.restart(sessions=False)
        # the existing connection survived the listener restart
        assert (await _run(conn, "echo still")).stdout.strip() == "still"
        async with await ssh_env.connect(host) as conn2:
            assert (await _run(conn2, "echo new")).stdout.strip() == "new"


def test_start_failure_shows_log(sshd_factory):
    host = sshd_factory.create(start=False, extra_config=["ThisIsNotAnOption yes"])
    from tests.support.sshd import SshdError

    with pytest.raises(SshdError, match="ThisIsNotAnOption"):
        host.start()


async def test_factory_teardown_reports_leaked_processes(tmp_path, ssh_keys):
    """A process that escapes its session (orphaned, ignores EOF) is found by its env marker,
    killed, and reported by the factory's teardown."""
    from tests.support.sshd import SshdFactory

    factory = SshdFactory(tmp_path, ssh_keys)
    factory.leak_grace = 0.3
    try:
        (host,) = factory(1)
        async with await factory.env.connect(host) as conn:
            await conn.run("setsid sleep 30 </dev/null >/dev/null 2>&1 &", check=True)
        await asyncio.sleep(0.2)
        leaked = [p for p in host.marked_processes() if p.name() == "sleep"]
        assert len(leaked) == 1
        assert leaked[0].pid not in [p.pid for p in host.sessions_processes()]  # orphaned
    finally:
        problems = factory.teardown()
    assert len(problems) == 1 and "sleep 30" in problems[0], problems
    assert not leaked[0].is_running() or leaked[0].status() == psutil.STATUS_ZOMBIE

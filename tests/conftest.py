"""Shared pytest fixtures for gpuwatch.

SSH fixtures (real OpenSSH sshd on 127.0.0.2, 127.0.0.3, ...; see tests/support/sshd.py):

  ssh_keys       (session)  ClientKeys: throwaway client key pair + a 'wrong' pair
  sshd_factory   (function) SshdFactory: ``hosts = sshd_factory(2)`` starts 2 hosts;
                            stops all at teardown and fails the test if any process
                            of theirs (by pid, or by the session env marker) survives
  ssh_env        (function) SshEnv: throwaway HOME with .ssh/{id_ed25519,known_hosts,config}
                            kept in sync with the hosts the factory creates
  relay_factory  (function) ``relay = relay_factory(host)``: a started TcpRelay on
                            127.0.0.1 in front of host (its key is added to ssh_env's
                            known_hosts for [127.0.0.1]:relay.port); closed at teardown

Tests using these get the ``ssh`` marker automatically and are skipped (with the
reason) only when /usr/sbin/sshd or ssh-keygen is missing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.support import procs as _procs  # noqa: E402
from tests.support.net import loopback_address  # noqa: E402
from tests.support.relay import TcpRelay  # noqa: E402
from tests.support.sshd import ClientKeys, SshdHost, SshEnv, sshd_unavailable_reason  # noqa: E402

SSH_FIXTURES = {"ssh_keys", "sshd_factory", "ssh_env", "relay_factory"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SSH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ssh)


def _skip_without_sshd() -> None:
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory) -> ClientKeys:
    _skip_without_sshd()
    return ClientKeys(tmp_path_factory.mktemp("ssh-keys"))


class SshdFactory:
    """Creates SshdHost objects on 127.0.0.2, .3, ... with distinct ports.

    ``factory(n=1, **host_kwargs) -> list[SshdHost]`` (started) and
    ``factory.create(name=None, start=True, **host_kwargs) -> SshdHost``.
    host_kwargs: max_sessions, env, fake_nvidia_smi, scenario, path_dirs, extra_config, port.
    Set ``check_leaks = False`` to turn the teardown leak check off for one test.
    """

    def __init__(self, base: Path, client_keys: ClientKeys):
        self.base = Path(base)
        self.client_keys = client_keys
        self.hosts: list[SshdHost] = []
        self.env = SshEnv(self.base / "home", client_keys)
        self.check_leaks = True
        self.leak_grace = 5.0

    def __call__(self, n: int = 1, **kw) -> list[SshdHost]:
        return [self.create(**kw) for _ in range(n)]

    def create(self, *, name: str | None = None, start: bool = True, **kw) -> SshdHost:
        octet = 2 + len(self.hosts)
        address = loopback_address(octet)
        name = name or f"host{octet}"
        host = SshdHost(self.base / name, address, self.client_keys, name=name, **kw)
        self.hosts.append(host)
        if start:
            host.start()
        self.env.add_host(host)
        return host

    def teardown(self) -> list[str]:
        problems: list[str] = []
        for h in self.hosts:
            try:
                h.stop()
            except Exception as exc:  # keep stopping the others
                problems.append(f"{h.name}: stop() failed: {exc!r}")
        deadline = time.monotonic() + self.leak_grace
        while True:
            left = {h.name: h.leftover_processes() for h in self.hosts}
            left = {k: v for k, v in left.items() if v}
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for name, refs in left.items():
            _procs.terminate(refs, timeout=2.0)
            for r in refs:
                problems.append(f"{name}: {r} was still running at teardown (killed now)")
        return problems


@pytest.fixture
def sshd_factory(tmp_path_factory, ssh_keys):
    _skip_without_sshd()
    factory = SshdFactory(tmp_path_factory.mktemp("sshd"), ssh_keys)
    yield factory
    problems = factory.teardown()
    if problems and factory.check_leaks:
        pytest.fail("sshd test hosts leaked processes:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def ssh_env(sshd_factory) -> SshEnv:
    return sshd_factory.env


@pytest.fixture
def relay_factory(ssh_env):
    relays: list[TcpRelay] = []

    def make(host: SshdHost, *, listen_host: str = "127.0.0.1") -> TcpRelay:
        relay = TcpRelay(host.address, host.port, listen_host=listen_host).start()
        relays.append(relay)
        ssh_env.add_known_host(listen_host, relay.port, host)
        return relay

    yield make
    for r in relays:
        r.close()

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
reason) only when /usr/sbin/sshd or ssh-keygen is missing, and then fail instead under
scripts/test.sh (tests/support/services.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from tests.support.relay import TcpRelay  # noqa: E402
from tests.support.services import service_missing  # noqa: E402
from tests.support.sshd import ClientKeys, SshdFactory, SshdHost, SshEnv, sshd_unavailable_reason  # noqa: E402

SSH_FIXTURES = {"ssh_keys", "sshd_factory", "ssh_env", "relay_factory"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SSH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ssh)


def _skip_without_sshd() -> None:
    reason = sshd_unavailable_reason()
    if reason:
        service_missing("OpenSSH sshd", reason)


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory) -> ClientKeys:
    _skip_without_sshd()
    return ClientKeys(tmp_path_factory.mktemp("ssh-keys"))


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

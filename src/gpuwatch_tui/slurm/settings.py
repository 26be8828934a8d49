"""`[slurm]` in the config: where squeue runs, whose jobs, how often, how the nodes are reached.

    [slurm]
    login = "login1"          # an ssh alias / user@host:port, the name of a [[hosts]] entry, or "local"
    user = "alice"            # whose jobs (default: the login node's SSH user, or who runs gpuwatch); "*": all
    poll_interval = "10s"
    sacct = true              # final states from accounting; false (or no slurmdbd): scontrol only
    queue_format = "text"     # "text" (any version) or "json" (squeue --json, where the version has it)
    watch_nodes = true        # the nodes of running jobs become watched hosts
    node_jump = "login"       # "login": ProxyJump through the login node; "none": straight; or an ssh target
    node_user = "alice"       # default: the login node's user
    ended_keep = "1h"         # how long ended jobs stay listed
    [slurm.node_address]      # node name -> address[:port] or ssh alias, for nodes not reachable by name
    gpu01 = "10.0.0.11"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..config_records import HostConfig
from ..errors import ConfigError

QUEUE_FORMATS = ("text", "json")
_TARGET = re.compile(r"^[A-Za-z0-9_.@:%\[\]-]+$")
_USER = re.compile(r"^[A-Za-z0-9_.@-]+$")
_NODE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class SlurmConfig:
    login: str = "local"  # "local" or an ssh target / [[hosts]] name
    login_host: HostConfig | None = None  # the login node (None: local)
    user: str | None = None  # None: the login's SSH user, or the local user; "*": everyone's jobs
    poll_interval: float = 10.0
    sacct: bool = True
    queue_format: str = "text"
    watch_nodes: bool = True
    node_jump: str = "login"
    node_user: str | None = None
    node_identity_file: str | None = None
    node_address: tuple[tuple[str, str], ...] = ()
    ended_keep: float = 3600.0
    command_timeout: float = 30.0

    @property
    def is_local(self) -> bool:
        return self.login_host is None

    def address_of(self, node: str) -> str:
        return dict(self.node_address).get(node, node)


def parse_slurm(data: Any, file: str, warnings: list[str], hosts: list, reader_cls, split_ssh_target) -> SlurmConfig | None:
    """The [slurm] table (None when absent). `hosts` are the parsed [[hosts]], for `login = "<name>"`."""
    if data is None:
        return None
    r = reader_cls(data, file, "slurm", warnings)
    d = SlurmConfig()
    login = r.string("login", "local")
    login_host = None
    if login.strip() == "":
        raise ConfigError(file, "slurm.login", '"local", an ssh alias or user@host:port, or a [[hosts]] name', login)
    if login != "local":
        named = next((h for h in hosts if h.name == login), None)
        if named is not None and named.ssh:
            login_host = named
        elif named is not None and named.local:
            login_host = None
        else:
            if login.startswith("-") or not _TARGET.match(login):
                raise ConfigError(file, "slurm.login",
                                  '"local", a [[hosts]] name, or an ssh alias / user@host:port '
                                  "(letters, digits and . _ - @ : only; no leading '-')", login)
            try:
                user, host, port = split_ssh_target(login)
            except ValueError:
                raise ConfigError(file, "slurm.login", "user@host:port with a numeric port", login) from None
            if not host or (port is not None and not 1 <= port <= 65535):
                raise ConfigError(file, "slurm.login", "user@host:port with a host and a port from 1 to 65535",
                                  login)
            identity = r.string("identity_file")
            login_host = HostConfig(name=f"slurm-login:{host}", ssh=login, host=host, port=port, user=user,
                                    identity_file=identity)
    r.used.add("identity_file")
    user = r.string("user")
    if user is not None and user != "*" and (user.startswith("-") or not _USER.match(user)):
        raise ConfigError(file, "slurm.user", 'a user name (letters, digits and . _ - @ only), or "*" for all users',
                          user)
    poll = r.duration("poll_interval", d.poll_interval)
    if not 1 <= poll <= 3600:
        raise ConfigError(file, "slurm.poll_interval", "a duration from 1s to 1h", poll)
    sacct = r.get("sacct", (bool,), "true or false", d.sacct)
    queue_format = r.string("queue_format", d.queue_format)
    if queue_format not in QUEUE_FORMATS:
        raise ConfigError(file, "slurm.queue_format", " or ".join(f'"{f}"' for f in QUEUE_FORMATS), queue_format)
    watch_nodes = r.get("watch_nodes", (bool,), "true or false", d.watch_nodes)
    node_jump = r.string("node_jump", d.node_jump)
    if node_jump not in ("login", "none") and (node_jump.startswith("-") or not _TARGET.match(node_jump)):
        raise ConfigError(file, "slurm.node_jump", '"login", "none", or an ssh alias / user@host:port', node_jump)
    node_user = r.string("node_user")
    if node_user is not None and (node_user.startswith("-") or not _USER.match(node_user)):
        raise ConfigError(file, "slurm.node_user", "a user name (letters, digits and . _ - @ only)", node_user)
    node_identity = r.string("node_identity_file")
    raw_addr = r.get("node_address", (dict,), 'a table of node = "address[:port]" strings', {})
    addresses = []
    for node, addr in raw_addr.items():
        if not _NODE.match(node):
            raise ConfigError(file, f"slurm.node_address.{node}", "a Slurm node name (letters, digits, . _ -)", node)
        if not isinstance(addr, str) or addr.startswith("-") or not _TARGET.match(addr):
            raise ConfigError(file, f"slurm.node_address.{node}", "an address, address:port or ssh alias", addr)
        try:
            _, host, port = split_ssh_target(addr)
        except ValueError:
            raise ConfigError(file, f"slurm.node_address.{node}", "address:port with a numeric port", addr) from None
        if not host or (port is not None and not 1 <= port <= 65535):
            raise ConfigError(file, f"slurm.node_address.{node}", "address:port with a port from 1 to 65535", addr)
        addresses.append((node, addr))
    ended_keep = r.duration("ended_keep", d.ended_keep)
    if not 0 <= ended_keep <= 7 * 86400:
        raise ConfigError(file, "slurm.ended_keep", "a duration from 0s to 7d", ended_keep)
    timeout = r.duration("command_timeout", d.command_timeout)
    if not 1 <= timeout <= 600:
        raise ConfigError(file, "slurm.command_timeout", "a duration from 1s to 10m", timeout)
    r.finish()
    return SlurmConfig(login=login, login_host=login_host, user=user, poll_interval=poll, sacct=sacct,
                       queue_format=queue_format, watch_nodes=watch_nodes, node_jump=node_jump, node_user=node_user,
                       node_identity_file=node_identity, node_address=tuple(addresses), ended_keep=ended_keep,
                       command_timeout=timeout)

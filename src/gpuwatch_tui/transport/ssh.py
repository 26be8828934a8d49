"""SSH connections through asyncssh: ~/.ssh/config, agent and known_hosts honoured, host keys
always verified, failures turned into a host state with words a person can act on."""

from __future__ import annotations

import asyncio
import getpass
import os
import shlex
import socket

import asyncssh
import asyncssh.config
from asyncssh.config import SSHClientConfig

from ..config_records import HostConfig, Settings, split_ssh_target
from .failure import ConnectFailure


def _expand(path: str) -> str:
    return os.path.expanduser(os.path.expandvars(path))


class SshConnector:
    """Opens SSH connections, capping how many connect at once and sharing jump hosts."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._slots = asyncio.Semaphore(settings.max_concurrent_connects)
        self._jumps: dict[str, asyncssh.SSHClientConnection] = {}
        self._jump_locks: dict[str, asyncio.Lock] = {}
        self._proxy_jumps: dict[tuple, str | None] = {}

    # -- options -------------------------------------------------------------------
    def config_files(self) -> list[str]:
        return [p for p in (_expand(c) for c in self.settings.ssh_config) if os.path.exists(p)]

    def known_hosts_path(self) -> str:
        return _expand(self.settings.known_hosts)

    def known_hosts(self) -> asyncssh.SSHKnownHosts:
        path = self.known_hosts_path()
        if os.path.exists(path):
            return asyncssh.read_known_hosts(path)
        return asyncssh.import_known_hosts("")  # no file: nothing is trusted

    def _options(self, target: str, port: int | None, user: str | None, identity: str | None) -> dict:
        opts: dict = {
            "host": target,
            "config": self.config_files(),
            "known_hosts": self.known_hosts(),
            "connect_timeout": self.settings.connect_timeout,
            "login_timeout": self.settings.connect_timeout,
            "keepalive_interval": self.settings.keepalive_interval,
            "keepalive_count_max": self.settings.keepalive_count_max,
        }
        if port is not None:
            opts["port"] = port
        if user is not None:
            opts["username"] = user
        if identity is not None:
            path = _expand(identity)
            if not os.path.isfile(path):
                raise ConnectFailure("auth-failed", f"identity file {path} not found")
            opts["client_keys"] = [path]
        return opts

    # -- connecting ----------------------------------------------------------------
    async def connect(self, host: HostConfig) -> asyncssh.SSHClientConnection:
        assert host.ssh is not None
        target = host.host or host.ssh
        opts = self._options(target, host.port, host.user, host.identity_file)
        jump = self.jump_for(host)
        if jump:
            opts["tunnel"] = await self._jump(jump)
        async with self._slots:
            return await self._open(opts, host.name)

    def jump_for(self, host: HostConfig) -> str | None:
        """The jump host this host is reached through: its own `jump`, else the ssh config's ProxyJump."""
        return host.jump or self._config_proxy_jump(host.host or host.ssh, host.port, host.user)

    def resolved_target(self, host: HostConfig) -> tuple[str, int]:
        """The address and port ssh would dial, after ~/.ssh/config (HostName, Port). Raises where the
        config cannot be read (asyncssh says what)."""
        options = asyncssh.SSHClientConnectionOptions(
            host=host.host or host.ssh, port=host.port if host.port is not None else (),
            config=self.config_files(), known_hosts=None,
        )
        return options.host, options.port

    def _config_proxy_jump(self, target: str, port: int | None, user: str | None) -> str | None:
        """The ProxyJump the ssh config gives this host, so that we open (and share) the jump
        connection ourselves: asyncssh would open a private one per host, without our
        known_hosts and keepalive settings."""
        files = self.config_files()
        if not files:
            return None
        stamp = []
        for f in files:
            try:
                st = os.stat(f)
                stamp.append((f, st.st_mtime_ns, st.st_size))
            except OSError:
                stamp.append((f, 0, 0))
        key = (target, port, user, tuple(stamp))
        if key not in self._proxy_jumps:
            if not self._may_proxy_jump(files):
                return None
            self._proxy_jumps[key] = self._read_proxy_jump(files, target, port, user)
        return self._proxy_jumps[key]

    @staticmethod
    def _may_proxy_jump(files: list[str]) -> bool:
        """Cheap pre-check: parsing a config costs ~10 ms a host, most configs have no ProxyJump."""
        for f in files:
            try:
                with open(f, "rb") as fh:
                    text = fh.read().lower()
            except OSError:
                continue
            if b"proxyjump" in text or b"include" in text or b"match" in text:
                return True
        return False

    def _read_proxy_jump(self, files: list[str], target: str, port: int | None, user: str | None) -> str | None:
        try:
            config = SSHClientConfig.load(
                None, files, False, False, False, getpass.getuser(),
                user if user is not None else (), target, port if port is not None else (),
            )
            jump = config.get("ProxyJump")
        except Exception:
            return None  # asyncssh reports a broken config itself, when it connects
        return jump if isinstance(jump, str) and jump and jump.lower() != "none" else None

    async def _jump(self, jump: str, _through: tuple[str, ...] = ()) -> asyncssh.SSHClientConnection:
        """One shared connection per jump host; reopened when it has died.

        A chain "a,b" reaches b through (the shared connection to) a."""
        if jump in _through or len(_through) > 8:
            raise ConnectFailure("unreachable", f"jump hosts loop: {' -> '.join(_through + (jump,))}")
        lock = self._jump_locks.setdefault(jump, asyncio.Lock())
        async with lock:
            conn = self._jumps.get(jump)
            if conn is not None and not conn.is_closed():
                return conn
            first, _, last = jump.rpartition(",")
            try:
                user, target, port = split_ssh_target(last.strip())
            except ValueError:
                raise ConnectFailure("unreachable", f"jump host {jump!r}: not an alias or user@host:port") from None
            opts = self._options(target, port, user, None)
            # The jump host's own ProxyJump (from the config or the chain) is shared too.
            via = first.strip() or self._config_proxy_jump(target, port, user)
            if via:
                opts["tunnel"] = await self._jump(via, _through + (jump,))
            try:
                async with self._slots:
                    conn = await self._open(opts, f"jump host {jump}")
            except ConnectFailure as failure:
                raise ConnectFailure(failure.state, f"jump host {jump}: {failure.reason}", failure.hint) from None
            self._jumps[jump] = conn
            return conn

    async def _open(self, opts: dict, label: str) -> asyncssh.SSHClientConnection:
        try:
            return await asyncssh.connect(**opts)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise await self._host_key_failure(opts, exc) from None
        except asyncssh.PermissionDenied as exc:
            raise ConnectFailure("auth-failed", f"authentication refused: {exc.reason or 'no key accepted'}") from None
        except asyncssh.DisconnectError as exc:
            raise ConnectFailure("unreachable", f"disconnected: {exc.reason}") from None
        except (asyncio.TimeoutError, TimeoutError):
            raise ConnectFailure("unreachable", f"timed out after {self.settings.connect_timeout:g}s") from None
        except socket.gaierror as exc:
            raise ConnectFailure("unreachable", f"name not resolved: {exc.strerror}") from None
        except ConnectionRefusedError:
            raise ConnectFailure("unreachable", "connection refused") from None
        except OSError as exc:
            raise ConnectFailure("unreachable", exc.strerror or str(exc)) from None
        except asyncssh.Error as exc:
            raise ConnectFailure("unreachable", str(exc)) from None
        except asyncssh.config.ConfigParseError as exc:
            raise ConnectFailure("unreachable", f"ssh config error: {exc}") from None
        except asyncssh.KeyImportError as exc:  # an identity file that is not a usable key
            raise ConnectFailure("auth-failed", f"could not load a client key: {exc}") from None
        except ValueError as exc:  # e.g. a bad option value
            raise ConnectFailure("unreachable", f"ssh options: {exc}") from None

    async def _host_key_failure(self, opts: dict, exc: Exception) -> ConnectFailure:
        """Unknown or changed? Fetch the offered key (no login, no data) to say which and show it."""
        options = asyncssh.SSHClientConnectionOptions(
            host=opts["host"], port=opts.get("port", ()), config=opts["config"],
            known_hosts=opts["known_hosts"],
        )
        host, port = options.host, options.port
        fingerprint = key_type = None
        try:
            key = await asyncio.wait_for(asyncssh.get_server_host_key(
                host, port, tunnel=opts.get("tunnel", ()), config=opts["config"],
            ), self.settings.connect_timeout)
            if key is not None:
                fingerprint, key_type = key.get_fingerprint("sha256"), key.get_algorithm()
        except Exception:
            pass
        known = self.known_hosts()
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addr = infos[0][4][0]
        except (OSError, IndexError):
            addr = host
        trusted, *_ = known.match(host, addr, port if port != 22 else None)
        where = host if port == 22 else f"[{host}]:{port}"
        path = self.known_hosts_path()
        offered = f"{key_type} {fingerprint}" if fingerprint else "(could not read the offered key)"
        # Words a person may paste into a shell: quote everything that came from config.
        keyscan = f"ssh-keyscan -p {int(port)} {shlex.quote(host)} >> {shlex.quote(path)}"
        if trusted:
            return ConnectFailure(
                "host-key-changed",
                f"HOST KEY CHANGED for {where}: offered {offered} does not match {path}",
                f"if the change is expected, verify the fingerprint, then: "
                f"ssh-keygen -R {shlex.quote(where)} -f {shlex.quote(path)} && {keyscan}",
            )
        return ConnectFailure(
            "host-key-unknown",
            f"unknown host key for {where}: {offered}",
            f"verify the fingerprint, then trust it: {keyscan}",
        )

    async def close(self) -> None:
        for conn in self._jumps.values():
            conn.close()
        for conn in self._jumps.values():
            try:
                await asyncio.wait_for(conn.wait_closed(), 3)
            except Exception:
                pass
        self._jumps.clear()

"""Real OpenSSH sshd test hosts on loopback (127.0.0.2, 127.0.0.3, ...).

Each `SshdHost` is one `/usr/sbin/sshd -D` listener with its own address, port,
throwaway ed25519 host key, authorized_keys file, fake-`nvidia-smi` bin dir and
fake-smi scenario file.  The per-host environment (PATH with the fake first,
GPUWATCH_FAKE_SMI, a leak-tracking marker, anything extra) is delivered through
`environment="NAME=value"` options on the key line in that host's
authorized_keys (sshd runs with `PermitUserEnvironment yes`).  sshd re-reads
authorized_keys on every login, so `set_env()` takes effect for new
connections without a restart.

Nothing here touches the real ~/.ssh: known_hosts and client config files are
written wherever the caller asks (see `write_known_hosts`, `write_ssh_config`
and `SshEnv`, which builds a throwaway HOME).
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import psutil

from . import procs as _procs
from .fake_nvidia_smi import install_fake_nvidia_smi
from .fake_smi_scenario import update_scenario, write_scenario
from .net import check_loopback, free_port, loopback_address

SSHD_PATH = "/usr/sbin/sshd"
DEFAULT_PATH_TAIL = ("/usr/local/bin", "/usr/bin", "/bin")
#: Every process started in a session of a test host carries MARKER_ENV=<host.marker>.
MARKER_ENV = "GPUWATCH_TEST_SSHD"
START_TIMEOUT = 10.0


class SshdError(RuntimeError):
    pass


# --------------------------------------------------------------------------- helpers


def sshd_unavailable_reason() -> str | None:
    """Why real-sshd tests cannot run here, or None if they can."""
    if not os.path.exists(SSHD_PATH):
        return f"{SSHD_PATH} is missing (apt-get install openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is missing (apt-get install openssh-client)"
    return None


def current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


_version_cache: tuple[int, int] | None = None


def openssh_version() -> tuple[int, int]:
    """(major, minor) of the installed sshd, from `sshd -V`."""
    global _version_cache
    if _version_cache is None:
        out = subprocess.run([SSHD_PATH, "-V"], capture_output=True, text=True)
        m = re.search(r"OpenSSH_(\d+)\.(\d+)", out.stdout + out.stderr)
        _version_cache = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return _version_cache


def ssh_keygen(path: Path, comment: str) -> None:
    """Write a passphrase-less ed25519 key pair at path / path.pub."""
    path = Path(path)
    for p in (path, path.with_name(path.name + ".pub")):
        if p.exists():
            p.unlink()
    subprocess.run(
        [shutil.which("ssh-keygen") or "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    path.chmod(0o600)


def public_key_fingerprint(public_key_line: str) -> str:
    """OpenSSH-style 'SHA256:...' fingerprint of a public key line ('ssh-ed25519 AAAA... [comment]')."""
    blob = base64.b64decode(public_key_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _read_pub(path: Path) -> str:
    return Path(path).read_text().strip()


class ClientKeys:
    """A throwaway client key pair plus a second, 'wrong' pair that no host authorizes.

    Attributes: private_key (Path), public_key_line (str), wrong_private_key (Path),
    wrong_public_key_line (str), fingerprint (str).
    """

    def __init__(self, directory: Path, comment: str = "gpuwatch-test"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.private_key = self.dir / "id_ed25519"
        self.wrong_private_key = self.dir / "wrong_ed25519"
        ssh_keygen(self.private_key, comment)
        ssh_keygen(self.wrong_private_key, comment + "-wrong")
        self.public_key = self.private_key.with_name("id_ed25519.pub")
        self.wrong_public_key = self.wrong_private_key.with_name("wrong_ed25519.pub")
        self.public_key_line = _read_pub(self.public_key)
        self.wrong_public_key_line = _read_pub(self.wrong_public_key)
        self.fingerprint = public_key_fingerprint(self.public_key_line)


TestUserKeys = ClientKeys  # name used in the design notes


def _authorized_keys_option_value(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("environment values cannot contain newlines")
    return value.replace('"', '\\"')


def authorized_key_line(public_key_line: str, environment: Mapping[str, str]) -> str:
    """`environment="K=V",... ssh-ed25519 AAAA...` for an authorized_keys file."""
    opts = ",".join(
        f'environment="{k}={_authorized_keys_option_value(str(v))}"' for k, v in environment.items()
    )
    return f"{opts} {public_key_line}" if opts else public_key_line


_libc = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _prctl = _libc.prctl
except (OSError, AttributeError):  # pragma: no cover
    _prctl = None


def _die_with_parent() -> None:  # runs in the forked child before exec
    if _prctl is not None:
        _prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


# --------------------------------------------------------------------------- the host


class SshdHost:
    """One real sshd listening on `address:port` (loopback only).

    Created stopped; call `start()`.  Files live under `workdir`:
    sshd_config, sshd.log, authorized_keys, ssh_host_ed25519_key(.pub),
    bin/ (fake nvidia-smi), fake-smi.json (scenario).
    """

    def __init__(
        self,
        workdir: Path,
        address: str,
        client_keys: ClientKeys,
        *,
        name: str | None = None,
        port: int | None = None,
        max_sessions: int = 10,
        env: Mapping[str, str] | None = None,
        fake_nvidia_smi: bool = True,
        scenario: Mapping | None = None,
        path_dirs: Sequence[str] | None = None,
        extra_config: Sequence[str] = (),
        login_grace_time: int = 60,
        isolated_home: bool = True,
        command_prefix: Sequence[str] = (),
    ):
        self.address = check_loopback(address)
        # Run sshd under this (e.g. `unshare --pid --fork --mount-proc --kill-child`: a "node" that sees
        # only its own processes, all of which die with it).
        self.command_prefix = list(command_prefix)
        self.name = name or f"host{address.rsplit('.', 1)[1]}"
        self.client_keys = client_keys
        self.user = current_user()
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = self.dir / "bin"
        self.bin_dir.mkdir(exist_ok=True)
        self.config_path = self.dir / "sshd_config"
        self.log_path = self.dir / "sshd.log"
        self.authorized_keys_path = self.dir / "authorized_keys"
        self.host_key_path = self.dir / "ssh_host_ed25519_key"
        self.scenario_path = self.dir / "fake-smi.json"
        # Sessions get HOME=<host dir>/home: each test host has its own ~ (like a separate
        # machine), and the real ~/.bashrc (which bash sources for ssh commands and which may
        # rewrite PATH) stays out of the way.  Pass isolated_home=False to keep the real HOME.
        self.home = self.dir / "home"
        self.home.mkdir(exist_ok=True)
        self.isolated_home = isolated_home
        self.max_sessions = max_sessions
        self.extra_config = list(extra_config)
        self.login_grace_time = login_grace_time
        self.marker = f"{self.name}-{secrets.token_hex(6)}"
        self._port_auto = port is None
        self._port = port if port is not None else free_port(self.address)
        self._extra_env: dict[str, str] = dict(env or {})
        self._path_dirs = list(path_dirs) if path_dirs is not None else [str(self.bin_dir), *DEFAULT_PATH_TAIL]
        self._authorized: list[str] = [client_keys.public_key_line]
        self._proc: subprocess.Popen | None = None
        self._logf = None
        self._frozen: list[_procs.ProcRef] = []
        self._tracked: dict[int, _procs.ProcRef] = {}
        self._listener_ref: _procs.ProcRef | None = None
        self.orphans: list[_procs.ProcRef] = []  # user processes whose sshd was SIGKILLed by kill()
        self._kept_sessions: list[_procs.ProcRef] = []  # sessions left running by stop(sessions=False)
        self._listener_ever_started = False

        ssh_keygen(self.host_key_path, f"{self.name}-hostkey")
        self.host_public_key_line = " ".join(_read_pub(self.host_key_path.with_name(self.host_key_path.name + ".pub")).split()[:2])
        self.host_key_fingerprint = public_key_fingerprint(self.host_public_key_line)
        if fake_nvidia_smi:
            install_fake_nvidia_smi(self.bin_dir)
        write_scenario(self.scenario_path, dict(scenario) if scenario is not None else self.default_scenario())

    # ------------------------------------------------------------------ basics

    def __repr__(self) -> str:
        return f"<SshdHost {self.name} {self.address}:{self._port} pid={self.pid}>"

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def frozen(self) -> bool:
        return bool(self._frozen)

    def default_scenario(self) -> dict:
        return {"gpus": 1, "phase": "idle", "uuid_prefix": f"GPU-{self.name}"}

    def set_scenario(self, scenario: Mapping | None = None, **fields) -> None:
        """Replace the fake-smi scenario of this host (atomically; picked up on the next tick)."""
        write_scenario(self.scenario_path, scenario, **fields)

    def update_scenario(self, **fields) -> dict:
        """Shallow-merge into the scenario (a value of None deletes that key)."""
        return update_scenario(self.scenario_path, **fields)

    # ------------------------------------------------------------------ environment / keys

    @property
    def environment(self) -> dict[str, str]:
        """The environment every session on this host gets (via authorized_keys)."""
        env = {
            "PATH": ":".join(self._path_dirs),
            "GPUWATCH_FAKE_SMI": str(self.scenario_path),
            MARKER_ENV: self.marker,
        }
        if self.isolated_home:
            env["HOME"] = str(self.home)
        env.update(self._extra_env)
        return env

    def set_env(self, **env: str | None) -> None:
        """Add/replace (or with None remove) extra session environment; applies to new logins."""
        for k, v in env.items():
            if v is None:
                self._extra_env.pop(k, None)
            else:
                self._extra_env[k] = str(v)
        self._write_authorized_keys()

    def set_path(self, dirs: Sequence[str]) -> None:
        """Replace the session PATH (list of dirs); applies to new logins."""
        self._path_dirs = list(dirs)
        self._write_authorized_keys()

    def authorize(self, public_key_line: str) -> None:
        """Also accept another client public key (with the same environment)."""
        self._authorized.append(public_key_line.strip())
        self._write_authorized_keys()

    def _write_authorized_keys(self) -> None:
        env = self.environment
        text = "".join(authorized_key_line(k, env) + "\n" for k in self._authorized)
        tmp = self.authorized_keys_path.with_name(".authorized_keys.tmp")
        tmp.write_text(text)
        tmp.chmod(0o600)
        os.replace(tmp, self.authorized_keys_path)

    def known_hosts_line(self, host: str | None = None, port: int | None = None) -> str:
        """`[127.0.0.2]:PORT ssh-ed25519 AAAA...` (host/port overridable, e.g. for a relay)."""
        h = host or self.address
        p = self._port if port is None else port
        pattern = h if p == 22 else f"[{h}]:{p}"
        return f"{pattern} {self.host_public_key_line}"

    def config_entry(self, alias: str | None = None, **kw) -> "SshConfigHost":
        return SshConfigHost(
            alias=alias or self.name,
            hostname=self.address,
            port=self._port,
            user=kw.pop("user", self.user),
            identity_file=kw.pop("identity_file", self.client_keys.private_key),
            **kw,
        )

    def connect_kwargs(self, known_hosts: Path | str, **overrides) -> dict:
        """Keyword arguments for asyncssh.connect() to this host (no ssh config, explicit known_hosts)."""
        kw = dict(
            host=self.address,
            port=self._port,
            username=self.user,
            known_hosts=str(known_hosts),
            client_keys=[str(self.client_keys.private_key)],
            config=None,
            agent_path=None,
        )
        kw.update(overrides)
        return kw

    # ------------------------------------------------------------------ config / lifecycle

    def _config_text(self) -> str:
        lines = [
            f"ListenAddress {self.address}:{self._port}",
            "AddressFamily inet",
            f"HostKey {self.host_key_path}",
            "PidFile none",
            "UsePAM no",
            "StrictModes no",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            f"AuthorizedKeysFile {self.authorized_keys_path}",
            "PermitUserEnvironment yes",
            f"MaxSessions {self.max_sessions}",
            "MaxStartups 100:30:200",
            "MaxAuthTries 10",
            "AllowTcpForwarding yes",
            "X11Forwarding no",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            f"LoginGraceTime {self.login_grace_time}",
            "LogLevel VERBOSE",
            "AcceptEnv LANG LC_* GPUWATCH_*",
            "Subsystem sftp internal-sftp",
        ]
        if openssh_version() >= (9, 8):
            lines.append("PerSourcePenalties no")  # auth failures from 127.0.0.1 must not lock us out
        lines.extend(self.extra_config)
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = START_TIMEOUT) -> "SshdHost":
        """Start sshd and wait until it accepts connections and sends its banner."""
        if self.running:
            return self
        if self._proc is not None:
            self._reap()
        reason = sshd_unavailable_reason()
        if reason:
            raise SshdError(reason)
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        self._write_authorized_keys()
        attempts = 5 if self._port_auto else 3
        last_err: Exception | None = None
        for _ in range(attempts):
            self.config_path.write_text(self._config_text())
            try:
                self._spawn_and_wait(timeout)
                return self
            except SshdError as exc:
                last_err = exc
                if "Address already in use" not in str(exc):
                    raise
                if self._port_auto and not self._listener_ever_started:
                    self._port = free_port(self.address)
                else:
                    time.sleep(0.5)
        raise last_err  # type: ignore[misc]

    def _spawn_and_wait(self, timeout: float) -> None:
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._logf = open(self.log_path, "ab")
        self._logf.write(f"----- gpuwatch test: starting sshd {self.name} on {self.address}:{self._port}\n".encode())
        self._logf.flush()
        preexec = _die_with_parent if threading.current_thread() is threading.main_thread() else None
        self._proc = subprocess.Popen(
            [*self.command_prefix, SSHD_PATH, "-D", "-e", "-f", str(self.config_path), "-E", str(self.log_path)],
            stdin=subprocess.DEVNULL,
            stdout=self._logf,
            stderr=self._logf,
            start_new_session=True,
            preexec_fn=preexec,
            close_fds=True,
        )
        self._listener_ref = None
        ready = f"Server listening on {self.address} port {self._port}"
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                text = self._log_since(log_offset)
                self._reap()
                raise SshdError(
                    f"sshd {self.name} ({self.address}:{self._port}) exited with {self._proc.returncode if self._proc else '?'}"
                    f" during startup; log {self.log_path}:\n{text}"
                )
            if ready in self._log_since(log_offset):
                break
            if time.monotonic() > deadline:
                text = self._log_since(log_offset)
                self._kill_listener_only()
                raise SshdError(
                    f"sshd {self.name} did not start listening on {self.address}:{self._port} within {timeout}s;"
                    f" log {self.log_path}:\n{text}"
                )
            time.sleep(0.01)
        # Prove the whole path works: TCP connect and read the SSH banner.
        try:
            with socket.create_connection((self.address, self._port), timeout=max(1.0, deadline - time.monotonic())) as s:
                banner = s.makefile("rb").readline(256)
        except OSError as exc:
            banner = f"<{exc}>".encode()
        if not banner.startswith(b"SSH-2.0-"):
            text = self._log_since(log_offset)
            self._kill_listener_only()
            raise SshdError(f"sshd {self.name} at {self.address}:{self._port} sent no SSH banner ({banner!r}); log:\n{text}")
        self._listener_ref = _procs.ProcRef.of(psutil.Process(self._proc.pid))
        self._listener_ever_started = True

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def _reap(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._logf is not None:
            self._logf.close()
            self._logf = None

    def _kill_listener_only(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self._reap()
        self._proc = None

    def _track(self, plist) -> list[_procs.ProcRef]:
        rs = _procs.refs(plist)
        for r in rs:
            self._tracked[r.pid] = r
        return rs

    def sessions_processes(self) -> list[psutil.Process]:
        """Live descendants of the listener: per-connection sshd processes and everything
        they started (shells, probe, nvidia-smi)."""
        if not self.running:
            return []
        plist = _procs.descendants(self._proc.pid)
        self._track(plist)
        return plist

    @staticmethod
    def _is_sshd(p: psutil.Process | _procs.ProcRef) -> bool:
        try:
            name = p.name if isinstance(p, _procs.ProcRef) else p.name()
        except (psutil.Error, OSError):
            return False
        return name.startswith("sshd")

    def marked_processes(self) -> list[psutil.Process]:
        """Every live process started in a session of this host, including ones that were
        orphaned (re-parented away from sshd): found by the MARKER_ENV=marker environment entry."""
        return _procs.processes_with_env(MARKER_ENV, self.marker)

    def user_processes(self) -> list[psutil.Process]:
        """Live non-sshd processes of this host's sessions (descendants + marked orphans)."""
        seen: dict[int, psutil.Process] = {}
        for p in self.sessions_processes():
            if not self._is_sshd(p):
                seen[p.pid] = p
        for p in self.marked_processes():
            seen.setdefault(p.pid, p)
        return list(seen.values())

    def _snapshot_with_listener_stopped(self) -> list[psutil.Process]:
        """SIGSTOP the listener (no new forks), then list its descendants."""
        _procs.stop_and_wait(self._proc.pid)
        return self._track_and_return(_procs.descendants(self._proc.pid))

    def _track_and_return(self, plist):
        self._track(plist)
        return plist

    def stop(self, timeout: float = 5.0, *, sessions: bool = True) -> None:
        """SIGTERM the listener (by pid) and wait.  With sessions=True (default) also SIGTERM
        (then SIGKILL) every process of its sessions, since sshd leaves those running."""
        if self._proc is None:
            return
        if self._frozen:
            self.thaw()
        if self._proc.poll() is None:
            kids = self._snapshot_with_listener_stopped()
            self._proc.send_signal(signal.SIGTERM)
            self._proc.send_signal(signal.SIGCONT)
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            if sessions:
                _procs.terminate(kids + self._kept_sessions, timeout=timeout)
                self._kept_sessions = []
            else:
                self._kept_sessions.extend(_procs.refs(kids))
        elif sessions and self._kept_sessions:
            _procs.terminate(self._kept_sessions, timeout=timeout)
            self._kept_sessions = []
        self._reap()
        self._proc = None

    def kill(self, *, user_processes: bool = False) -> None:
        """Crash the host's sshd: SIGKILL the listener and every per-connection sshd process,
        so all connections really die (the client sees a TCP reset/EOF).  The session's own
        processes (shell, probe) are left to notice on their own, as on a real host, unless
        user_processes=True; the ones left are recorded in `self.orphans`."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            _procs.stop_and_wait(self._proc.pid)
            kids = self._track_and_return(_procs.descendants(self._proc.pid))
            self._proc.kill()
            victims = [p for p in kids if user_processes or self._is_sshd(p)]
            rest = [p for p in kids if p not in victims]
            for r in _procs.refs(victims):
                r.signal(signal.SIGKILL)
            for r in _procs.refs(rest):
                r.signal(signal.SIGCONT)  # in case they were frozen
            self.orphans.extend(_procs.refs(rest))
            _procs.wait_gone(victims, 5.0)
        self._frozen = []
        self._reap()
        self._proc = None

    def freeze(self) -> None:
        """SIGSTOP the listener and all its descendants: established connections stop
        answering (TCP still ACKs), new connections hang before the banner."""
        if not self.running:
            raise SshdError(f"{self.name} is not running")
        _procs.stop_and_wait(self._proc.pid)
        frozen = {self._proc.pid: _procs.ProcRef.of(psutil.Process(self._proc.pid))}
        for _ in range(20):
            new = [p for p in _procs.descendants(self._proc.pid) if p.pid not in frozen]
            if not new:
                break
            for p in new:
                _procs.stop_and_wait(p.pid, timeout=1.0)
                r = _procs.ProcRef.of(p)
                if r:
                    frozen[p.pid] = r
        self._track([r for r in frozen.values() if r is not None])
        self._frozen = [r for r in frozen.values() if r is not None]

    def thaw(self) -> None:
        """SIGCONT everything freeze() stopped (and the listener's current descendants)."""
        targets = list(self._frozen)
        if self.running:
            targets += _procs.refs(_procs.descendants(self._proc.pid))
        # children first, listener last, so nothing new gets forked into a half-stopped tree
        for r in reversed(targets):
            r.signal(signal.SIGCONT)
        if self.running:
            self._proc.send_signal(signal.SIGCONT)
        self._frozen = []

    def restart(self, *, sessions: bool = True, timeout: float = START_TIMEOUT) -> "SshdHost":
        """Stop (if running; sessions=False keeps existing sessions alive like
        `systemctl restart ssh`) and start again on the same address, port and host key."""
        self.stop(sessions=sessions)
        return self.start(timeout=timeout)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 5.0) -> re.Match:
        """Wait until the sshd log matches regex *pattern*."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log_text())
            if m:
                return m
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pattern!r} not in {self.log_path}:\n{self.log_text()[-4000:]}")
            time.sleep(0.02)

    def leftover_processes(self) -> list[_procs.ProcRef]:
        """After stop()/kill(): anything of ours still alive (listener, tracked session
        processes, orphans, marked processes)."""
        out: dict[int, _procs.ProcRef] = {}
        cands = list(self._tracked.values()) + list(self.orphans)
        if self._listener_ref is not None:
            cands.append(self._listener_ref)
        for r in cands:
            if r.alive():
                out[r.pid] = r
        for r in _procs.refs(self.marked_processes()):
            out.setdefault(r.pid, r)
        if self.running:
            for r in _procs.refs(self.sessions_processes()):
                out.setdefault(r.pid, r)
        return list(out.values())


# --------------------------------------------------------------------------- client-side files


def write_known_hosts(
    path: Path | str,
    hosts: Iterable["SshdHost | tuple[str, int, SshdHost] | str"],
    *,
    aliases: bool = False,
) -> Path:
    """Write an OpenSSH known_hosts file.

    Each item is an SshdHost (line `[address]:port key`, plus `[alias]:port` when
    aliases=True), a (host, port, SshdHost) tuple (e.g. a relay's address in front of
    a host), or a raw line.
    """
    lines = []
    for h in hosts:
        if isinstance(h, SshdHost):
            lines.append(h.known_hosts_line())
            if aliases:
                lines.append(h.known_hosts_line(host=h.name))
        elif isinstance(h, tuple):
            host, port, target = h
            lines.append(target.known_hosts_line(host=host, port=port))
        else:
            lines.append(str(h).strip())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, path)
    return path


@dataclass
class SshConfigHost:
    """One `Host` block of an OpenSSH client config."""

    alias: str
    hostname: str
    port: int
    user: str | None = None
    identity_file: Path | str | None = None
    proxy_jump: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def render(self) -> str:
        out = [f"Host {self.alias}", f"    HostName {self.hostname}", f"    Port {self.port}"]
        if self.user:
            out.append(f"    User {self.user}")
        if self.identity_file:
            out.append(f"    IdentityFile {self.identity_file}")
            out.append("    IdentitiesOnly yes")
        if self.proxy_jump:
            out.append(f"    ProxyJump {self.proxy_jump}")
        for k, v in self.options.items():
            out.append(f"    {k} {v}")
        return "\n".join(out) + "\n"


def write_ssh_config(
    path: Path | str,
    entries: Iterable[SshConfigHost | SshdHost],
    *,
    known_hosts: Path | str | None = None,
    proxy_jumps: Mapping[str, str] | None = None,
    global_options: Mapping[str, str] | None = None,
) -> Path:
    """Write an OpenSSH client config: one `Host alias` block per entry (SshdHost -> its
    `config_entry()`), `proxy_jumps` maps alias -> jump alias, and a final `Host *` block with
    UserKnownHostsFile/StrictHostKeyChecking/BatchMode so the `ssh` CLI behaves like the tests."""
    jumps = dict(proxy_jumps or {})
    blocks = []
    for e in entries:
        entry = e.config_entry() if isinstance(e, SshdHost) else e
        if entry.alias in jumps:
            entry.proxy_jump = jumps[entry.alias]
        blocks.append(entry.render())
    tail = {"StrictHostKeyChecking": "yes", "BatchMode": "yes"}
    if known_hosts is not None:
        tail = {"UserKnownHostsFile": str(known_hosts), "GlobalKnownHostsFile": "/dev/null", **tail}
    tail.update(global_options or {})
    blocks.append("Host *\n" + "".join(f"    {k} {v}\n" for k, v in tail.items()))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(blocks))
    os.replace(tmp, path)
    return path


class SshEnv:
    """Client-side files for a set of test hosts, in a throwaway HOME.

    home/.ssh/{id_ed25519, id_ed25519.pub, known_hosts, config}.  `refresh()` rewrites
    known_hosts and config from `hosts`; the factory calls it whenever it adds a host.
    Point the app at `ssh_config` / `known_hosts` via its settings, or run it with
    `environ()` (HOME=home).
    """

    def __init__(self, home: Path, client_keys: ClientKeys):
        self.home = Path(home)
        self.ssh_dir = self.home / ".ssh"
        self.ssh_dir.mkdir(parents=True, exist_ok=True)
        self.ssh_dir.chmod(0o700)
        self.client_keys = client_keys
        self.identity_file = self.ssh_dir / "id_ed25519"
        shutil.copyfile(client_keys.private_key, self.identity_file)
        self.identity_file.chmod(0o600)
        shutil.copyfile(client_keys.public_key, self.ssh_dir / "id_ed25519.pub")
        self.known_hosts = self.ssh_dir / "known_hosts"
        self.ssh_config = self.ssh_dir / "config"
        self.user = current_user()
        self.hosts: list[SshdHost] = []
        self.proxy_jumps: dict[str, str] = {}
        self.extra_known_hosts: list = []
        self.refresh()

    def add_host(self, host: SshdHost) -> None:
        if host not in self.hosts:
            self.hosts.append(host)
        self.refresh()

    def set_proxy_jump(self, alias: str, via: str | None) -> None:
        """Make `alias` reachable only through `via` (ProxyJump); None removes it."""
        if via is None:
            self.proxy_jumps.pop(alias, None)
        else:
            self.proxy_jumps[alias] = via
        self.refresh()

    def add_known_host(self, host: str, port: int, target: SshdHost) -> None:
        """Trust target's host key also at host:port (e.g. a relay in front of it)."""
        self.extra_known_hosts.append((host, port, target))
        self.refresh()

    def refresh(self) -> None:
        write_known_hosts(self.known_hosts, [*self.hosts, *self.extra_known_hosts], aliases=True)
        entries = [h.config_entry(identity_file=self.identity_file) for h in self.hosts]
        write_ssh_config(self.ssh_config, entries, known_hosts=self.known_hosts, proxy_jumps=self.proxy_jumps)

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["HOME"] = str(self.home)
        env.pop("SSH_AUTH_SOCK", None)
        return env

    def connect_kwargs(self, target: SshdHost, /, *, via=None, **overrides) -> dict:
        """asyncssh.connect() keyword arguments for *target* (explicit host/port/user/key,
        this env's known_hosts, config=None).  via: an object with .host/.port (a TcpRelay)
        to connect through instead; its address must be in known_hosts (relay_factory adds it)."""
        kw = target.connect_kwargs(self.known_hosts, client_keys=[str(self.identity_file)])
        if via is not None:
            kw.update(host=via.host, port=via.port)
        kw.update(overrides)
        return kw

    async def connect(self, target: "SshdHost | str", /, *, via=None, **overrides):
        """asyncssh.connect() to an SshdHost (explicit params, optionally through relay *via*)
        or to an alias (through this env's ssh config)."""
        import asyncssh

        if isinstance(target, SshdHost):
            return await asyncssh.connect(**self.connect_kwargs(target, via=via, **overrides))
        host = target
        kw = dict(
            config=[str(self.ssh_config)],
            known_hosts=str(self.known_hosts),
            agent_path=None,
        )
        kw.update(overrides)
        return await asyncssh.connect(host, **kw)


# --------------------------------------------------------------------------- factory


class SshdFactory:
    """Creates SshdHost objects on 127.0.0.2, .3, ... with distinct ports.

    ``factory(n=1, **host_kwargs) -> list[SshdHost]`` (started) and
    ``factory.create(name=None, start=True, **host_kwargs) -> SshdHost``.
    host_kwargs: max_sessions, env, fake_nvidia_smi, scenario, path_dirs, extra_config, port, command_prefix.
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

"""TOML config -> typed objects. Every mistake names the file, the key and what was expected."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from .actions.settings import LOG_MODES, ActionSettings
from .alerts.settings import AlertsConfig, parse_alerts
from .config_records import (  # noqa: F401 - the records are read from here too (the config's face)
    ExportSettings,
    HostConfig,
    JobConfig,
    PrometheusSource,
    Settings,
    add_source_hosts,
    split_ssh_target,
    unknown_key_warning,
)
from .errors import ConfigError
from .jobs.rules import parse_rules
from .slurm.settings import SlurmConfig, parse_slurm
from .vocab import GPU_SOURCE_CHOICES, parse_duration

CONFIG_ENV = "GPUWATCH_CONFIG"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_NAME = re.compile(r"^[A-Za-z0-9_.:@\[\]-]+$")
# An ssh alias, host, user@host, user@host:port or [v6]:port: nothing a shell would act on.
_SSH_TARGET = re.compile(r"^[A-Za-z0-9_.@:%\[\]-]+$")
_USER_NAME = re.compile(r"^[A-Za-z0-9_.@-]+$")


@dataclass(frozen=True)
class Config:
    path: str | None  # None: no file, watching this machine
    settings: Settings
    hosts: tuple[HostConfig, ...]
    jobs: tuple[JobConfig, ...] = ()
    rules: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    actions: ActionSettings = field(default_factory=ActionSettings)
    alerts: AlertsConfig = AlertsConfig()  # [alerts] and each job's `alerts = [...]`
    sources: tuple[PrometheusSource, ...] = ()
    export: ExportSettings = ExportSettings()
    slurm: "SlurmConfig | None" = None  # [slurm]: the queue on a login node (slurm/settings.py)


def default_config_path() -> Path:
    from platformdirs import user_config_dir  # not for `--help` or a run given --config

    return Path(user_config_dir("gpuwatch")) / "hosts.toml"


def resolve_config_path(cli_path: str | None) -> Path | None:
    """--config, then $GPUWATCH_CONFIG, then hosts.toml in the user config dir (if present)."""
    if cli_path:
        return Path(cli_path)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    default = default_config_path()
    return default if default.exists() else None


def local_only_config(settings: Settings | None = None) -> Config:
    name = socket.gethostname() or "localhost"
    return Config(None, settings or Settings(), (HostConfig(name=name, local=True),))


def load_config(cli_path: str | None = None) -> Config:
    """The config the program runs with: parsed, and the files it names checked on this machine."""
    path = resolve_config_path(cli_path)
    if path is None:
        return local_only_config()
    config = load_config_file(path)
    check_local_files(config)
    return config


def check_local_files(config: Config) -> None:
    """A missing identity_file is a config mistake to report now, not an auth failure retried forever."""
    for i, host in enumerate(config.hosts):
        if host.identity_file is not None and not os.path.isfile(os.path.expanduser(host.identity_file)):
            raise ConfigError(config.path or "(config)", f"hosts[{i}].identity_file",
                              "an existing private key file (it was not found)", host.identity_file)
    slurm = config.slurm
    if slurm is not None:
        login_key = slurm.login_host.identity_file if slurm.login_host is not None else None
        for key, path in (("slurm.identity_file", login_key), ("slurm.node_identity_file", slurm.node_identity_file)):
            if path is not None and not os.path.isfile(os.path.expanduser(path)):
                raise ConfigError(config.path or "(config)", key, "an existing private key file (it was not found)",
                                  path)


def load_config_file(path: Path | str) -> Config:
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(file, "(file)", "an existing file (it was not found)") from None
    except OSError as exc:
        raise ConfigError(file, "(file)", f"a readable file ({exc.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))  # Windows editors start the file with a BOM
    except UnicodeDecodeError:
        raise ConfigError(file, "(file)", "UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "(syntax)", f"valid TOML ({exc})") from None
    return parse_config(data, file)


class _Reader:
    """Typed access to one TOML table, recording which keys were used."""

    def __init__(self, table: Any, file: str, where: str, warnings: list[str]) -> None:
        if not isinstance(table, dict):
            raise ConfigError(file, where or "(top level)", "a table", table)
        self.table = table
        self.file = file
        self.where = where
        self.warnings = warnings
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def get(self, name: str, kinds: tuple[type, ...], expected: str, default: Any = None) -> Any:
        self.used.add(name)
        if name not in self.table:
            return default
        value = self.table[name]
        # bool is an int in Python; a TOML true is never a number here
        if isinstance(value, bool) and bool not in kinds:
            raise ConfigError(self.file, self.key(name), expected, value)
        if not isinstance(value, kinds):
            raise ConfigError(self.file, self.key(name), expected, value)
        return value

    def number(self, name: str, default: float, minimum: float, maximum: float) -> float:
        value = self.get(name, (int, float), f"a number from {minimum:g} to {maximum:g}", default)
        if not minimum <= value <= maximum:
            raise ConfigError(self.file, self.key(name), f"a number from {minimum:g} to {maximum:g}", value)
        return float(value)

    def integer(self, name: str, default: int, minimum: int, maximum: int) -> int:
        value = self.get(name, (int,), f"a whole number from {minimum} to {maximum}", default)
        if not minimum <= value <= maximum:
            raise ConfigError(self.file, self.key(name), f"a whole number from {minimum} to {maximum}", value)
        return int(value)

    def string(self, name: str, default: str | None = None, required: bool = False) -> str | None:
        if required and name not in self.table:
            raise ConfigError(self.file, self.key(name), "a string (this key is required)")
        value = self.get(name, (str,), "a string", default)
        if value is not None and required and not value.strip():
            raise ConfigError(self.file, self.key(name), "a non-empty string", value)
        return value

    def duration(self, name: str, default: float | None) -> float | None:
        self.used.add(name)
        if name not in self.table:
            return default
        return parse_duration(self.table[name], self.file, self.key(name))

    def finish(self) -> None:
        for name in self.table:
            if name not in self.used:
                self.warnings.append(unknown_key_warning(self.file, self.key(name), name, self.used))


def _string_list(r: _Reader, name: str) -> tuple[str, ...]:
    r.used.add(name)
    value = r.table.get(name)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(r.file, r.key(name), "a string or a list of strings", value)


def _parse_settings(data: dict, file: str, warnings: list[str]) -> Settings:
    r = _Reader(data.get("settings", {}), file, "settings", warnings)
    d = Settings()
    ssh_config = _string_list(r, "ssh_config") or d.ssh_config
    s = Settings(
        sample_interval=r.number("sample_interval", d.sample_interval, 0.1, 3600),
        history=r.integer("history", d.history, 2, 100_000),
        stall_after=r.duration("stall_after", d.stall_after),
        tail_lines=r.integer("tail_lines", d.tail_lines, 10, 1_000_000),
        connect_timeout=r.number("connect_timeout", d.connect_timeout, 0.5, 600),
        keepalive_interval=r.number("keepalive_interval", d.keepalive_interval, 1, 3600),
        keepalive_count_max=r.integer("keepalive_count_max", d.keepalive_count_max, 1, 100),
        max_concurrent_connects=r.integer("max_concurrent_connects", d.max_concurrent_connects, 1, 1024),
        reconnect_initial_delay=r.number("reconnect_initial_delay", d.reconnect_initial_delay, 0.05, 3600),
        reconnect_max_delay=r.number("reconnect_max_delay", d.reconnect_max_delay, 0.1, 86400),
        stale_after=r.number("stale_after", d.stale_after, 0.5, 3600),
        ssh_config=ssh_config,
        known_hosts=r.string("known_hosts", d.known_hosts),
        theme=r.string("theme", d.theme),
        readonly=r.get("readonly", (bool,), "true or false", d.readonly),
        record=r.string("record", d.record),
        record_retention=r.duration("record_retention", d.record_retention),
    )
    if s.record is not None and not s.record.strip():
        raise ConfigError(file, "settings.record", "a directory path (or leave the key out)", s.record)
    if not 60 <= s.record_retention <= 366 * 86400:
        raise ConfigError(file, "settings.record_retention", "a duration from 1m to 366d", s.record_retention)
    r.finish()
    return s


def _parse_actions(data: dict, file: str, warnings: list[str]) -> ActionSettings:
    r = _Reader(data.get("actions", {}), file, "actions", warnings)
    d = ActionSettings()
    grace = r.duration("kill_grace", d.kill_grace_s)
    gpu_wait = r.duration("restart_gpu_wait", d.restart_gpu_wait_s)
    for key, value in (("kill_grace", grace), ("restart_gpu_wait", gpu_wait)):
        if not 0 <= value <= 3600:
            raise ConfigError(file, f"actions.{key}", "a duration from 0s to 1h", value)
    mode = r.string("restart_log_mode", d.restart_log_mode)
    if mode not in LOG_MODES:
        raise ConfigError(file, "actions.restart_log_mode", " or ".join(f'"{m}"' for m in LOG_MODES), mode)
    s = ActionSettings(
        kill_grace_s=grace, restart_log_mode=mode, restart_gpu_wait_s=gpu_wait,
        pyspy_sudo=r.get("pyspy_sudo", (bool,), "true or false", d.pyspy_sudo),
        pyspy_native=r.get("pyspy_native", (bool,), "true or false", d.pyspy_native),
        flight_recorder=r.get("flight_recorder", (bool,), "true or false", d.flight_recorder),
    )
    r.finish()
    return s


def _parse_host(table: Any, index: int, file: str, warnings: list[str], default_interval: float) -> HostConfig:
    r = _Reader(table, file, f"hosts[{index}]", warnings)
    name = r.string("name", required=True)
    if not _HOST_NAME.match(name):
        raise ConfigError(file, r.key("name"), "letters, digits and . _ - @ : only", name)
    local = r.get("local", (bool,), "true or false", False)
    ssh = r.string("ssh")
    if not local and not ssh and "source" not in r.table:
        raise ConfigError(file, r.key("ssh"),
                          'an ssh target ("alias" or "user@host:port"), local = true, or a Prometheus `source`')
    if local and ssh:
        raise ConfigError(file, r.key("ssh"), "no ssh target on a host with local = true", ssh)
    user = host = None
    port = None
    if ssh:
        if ssh.startswith("-") or not _SSH_TARGET.match(ssh):
            raise ConfigError(
                file, r.key("ssh"),
                "an ssh alias or user@host:port (letters, digits and . _ - @ : [ ] only; no leading '-')", ssh,
            )
        try:
            user, host, port = split_ssh_target(ssh)
        except ValueError:
            raise ConfigError(file, r.key("ssh"), "user@host:port with a numeric port", ssh) from None
        if not host:
            raise ConfigError(file, r.key("ssh"), "a host name after '@'", ssh)
    port_key = r.get("port", (int,), "a port number from 1 to 65535", None)
    if port_key is not None:
        if not 1 <= port_key <= 65535:
            raise ConfigError(file, r.key("port"), "a port number from 1 to 65535", port_key)
        port = port_key
    elif port is not None and not 1 <= port <= 65535:
        raise ConfigError(file, r.key("ssh"), "a port number from 1 to 65535", ssh)
    user = r.string("user", user)
    if user is not None and (user.startswith("-") or not _USER_NAME.match(user)):
        raise ConfigError(file, r.key("user"), "a user name (letters, digits and . _ - @ only)", user)
    identity = r.string("identity_file")
    if identity is not None and not identity.strip():
        raise ConfigError(file, r.key("identity_file"), "a path to a private key file", identity)
    jump = r.string("jump")
    if jump is not None:
        expected_jump = "an ssh alias or user@host:port, or a chain of them separated by commas"
        hops = jump.split(",")
        for hop in hops:
            if not hop or hop.startswith("-") or not _SSH_TARGET.match(hop):
                raise ConfigError(file, r.key("jump"), expected_jump, jump)
            try:
                _, jump_host, jump_port = split_ssh_target(hop)
            except ValueError:
                raise ConfigError(file, r.key("jump"), expected_jump + " (numeric port)", jump) from None
            if not jump_host or (jump_port is not None and not 1 <= jump_port <= 65535):
                raise ConfigError(file, r.key("jump"), expected_jump, jump)
    r.used.add("prefix")
    prefix_raw = r.table.get("prefix")
    if prefix_raw is None:
        prefix: tuple[str, ...] = ()
    elif isinstance(prefix_raw, str):
        try:
            prefix = tuple(shlex.split(prefix_raw))
        except ValueError as exc:
            raise ConfigError(file, r.key("prefix"), f"a command prefix in shell words ({exc})", prefix_raw) from None
    elif isinstance(prefix_raw, list) and all(isinstance(v, str) for v in prefix_raw):
        prefix = tuple(prefix_raw)
    else:
        raise ConfigError(file, r.key("prefix"), 'a command prefix such as "docker exec -i trainer" or a list of words', prefix_raw)
    python = r.string("python", "python3")
    if not python.strip():
        raise ConfigError(file, r.key("python"), "an interpreter name or path", python)
    env_raw = r.get("env", (dict,), "a table of NAME = \"value\" strings", {})
    env = []
    for k, v in env_raw.items():
        if not _ENV_NAME.match(k):
            raise ConfigError(file, f"{r.key('env')}.{k}", "an environment variable name (letters, digits, _)", k)
        if not isinstance(v, str):
            raise ConfigError(file, f"{r.key('env')}.{k}", "a string value", v)
        env.append((k, v))
    r.used.add("source")  # resolved against [[sources]] by parse_config
    gpu_source = r.string("gpu_source", "auto")
    if gpu_source not in GPU_SOURCE_CHOICES:
        raise ConfigError(file, r.key("gpu_source"), "one of " + ", ".join(GPU_SOURCE_CHOICES), gpu_source)
    r.finish()
    return HostConfig(
        name=name, local=local, ssh=ssh, host=host, port=port, user=user, identity_file=identity,
        jump=jump, prefix=prefix, python=python, env=tuple(env), gpu_source=gpu_source,
    )


def _parse_job(table: Any, index: int, file: str, warnings: list[str], host_names: set[str]) -> JobConfig:
    r = _Reader(table, file, f"jobs[{index}]", warnings)
    name = r.string("name", required=True)
    host = r.string("host", required=True)
    if host not in host_names:
        raise ConfigError(file, r.key("host"), "the name of a host in [[hosts]] (" + ", ".join(sorted(host_names)) + ")", host)
    match = r.string("match")
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise ConfigError(file, r.key("match"), f"a regular expression ({exc})", match) from None
    pid_file = r.string("pid_file")
    if match is None and pid_file is None:
        raise ConfigError(file, r.key("match"), "a cmdline regex in `match` or a `pid_file` path")
    logs = _string_list(r, "log") + _string_list(r, "logs")
    output_dir = r.string("output_dir")
    stall_after = r.duration("stall_after", None)
    r.used.add("alerts")  # read with [alerts] (alerts/settings.py)
    r.finish()
    return JobConfig(name, host, match, pid_file, logs, output_dir, stall_after)


def parse_config(data: dict, file: str) -> Config:
    warnings: list[str] = []
    known_top = {"settings", "hosts", "jobs", "rules", "actions", "alerts", "sources", "export", "slurm"}
    for key in data:
        if key not in known_top:
            warnings.append(unknown_key_warning(file, key, key, known_top))
    settings = _parse_settings(data, file, warnings)
    actions = _parse_actions(data, file, warnings)
    sources = _parse_sources(data, file, warnings)
    export = _parse_export(data, file, warnings)
    hosts_raw = data.get("hosts", [])
    if not isinstance(hosts_raw, list):
        raise ConfigError(file, "hosts", "an array of tables written [[hosts]]", hosts_raw)
    hosts: list[HostConfig] = []
    seen: set[str] = set()
    by_source_name = {s.name: s for s in sources}
    for i, table in enumerate(hosts_raw):
        host = _parse_host(table, i, file, warnings, settings.sample_interval)
        if host.name in seen:
            raise ConfigError(file, f"hosts[{i}].name", "a name not used by another host", host.name)
        if isinstance(table, dict) and "source" in table:
            host = dataclasses.replace(host, source=_source_by_name(table["source"], by_source_name, file,
                                                                    f"hosts[{i}].source"))
        seen.add(host.name)
        hosts.append(host)
    hosts = add_source_hosts(hosts, [(s, s.hosts) for s in sources])
    seen = {h.name for h in hosts}
    if not hosts and not sources:
        hosts.append(local_only_config().hosts[0])
        warnings.append(f"{file}: hosts: no [[hosts]]; watching this machine")
    jobs_raw = data.get("jobs", [])
    if not isinstance(jobs_raw, list):
        raise ConfigError(file, "jobs", "an array of tables written [[jobs]]", jobs_raw)
    jobs = tuple(_parse_job(t, i, file, warnings, seen | {h.name for h in hosts}) for i, t in enumerate(jobs_raw))
    rules_raw = data.get("rules", [])
    if not isinstance(rules_raw, list) or not all(isinstance(t, dict) for t in rules_raw):
        raise ConfigError(file, "rules", "an array of tables written [[rules]]", rules_raw)
    _check_rules(rules_raw, file)
    alerts = parse_alerts(data.get("alerts"), [(j.name, j.host, t.get("alerts")) for j, t in zip(jobs, jobs_raw)],
                          file, warnings)
    slurm = parse_slurm(data.get("slurm"), file, warnings, hosts, _Reader, split_ssh_target)
    return Config(file, settings, tuple(hosts), jobs, tuple(rules_raw), tuple(warnings), actions, alerts,
                  sources, export, slurm)


def _check_rules(rules_raw: list, file: str) -> None:
    """User rules are validated by the rule engine, which knows their schema."""
    parse_rules(rules_raw, file)


# ----------------------------------------------------------------------------- [[sources]], [export]
SOURCE_KINDS = ("prometheus",)
# One PromQL label matcher: name, operator, double-quoted value. The selector is pasted into queries,
# so nothing else (no functions, no braces, no second expression) may get in.
_MATCHER = r'[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"'
_SELECTOR = re.compile(rf"^\s*(?:{_MATCHER}(?:\s*,\s*{_MATCHER})*)?\s*,?\s*$")


def _parse_sources(data: dict, file: str, warnings: list[str]) -> tuple[PrometheusSource, ...]:
    raw = data.get("sources", [])
    if not isinstance(raw, list):
        raise ConfigError(file, "sources", "an array of tables written [[sources]]", raw)
    sources: list[PrometheusSource] = []
    for i, table in enumerate(raw):
        source = _parse_source(table, i, file, warnings)
        if any(s.name == source.name for s in sources):
            raise ConfigError(file, f"sources[{i}].name", "a name not used by another source", source.name)
        sources.append(source)
    return tuple(sources)


def _parse_source(table: Any, index: int, file: str, warnings: list[str]) -> PrometheusSource:
    r = _Reader(table, file, f"sources[{index}]", warnings)
    kind = r.string("kind", required=True)
    if kind not in SOURCE_KINDS:
        raise ConfigError(file, r.key("kind"), "one of " + ", ".join(SOURCE_KINDS), kind)
    name = r.string("name", "prometheus" if index == 0 else f"prometheus-{index}")
    if not _HOST_NAME.match(name):
        raise ConfigError(file, r.key("name"), "letters, digits and . _ - @ : only", name)
    url = r.string("url", required=True).strip().rstrip("/")
    if not re.match(r"^https?://[^\s/]+(/\S*)?$", url):
        raise ConfigError(file, r.key("url"), 'the base URL of a Prometheus server, e.g. "http://prometheus:9090"',
                          url)
    selector = r.string("selector", "").strip()
    if selector.startswith("{") and selector.endswith("}"):
        selector = selector[1:-1].strip()
    if not _SELECTOR.match(selector):
        raise ConfigError(file, r.key("selector"),
                          'PromQL label matchers such as cluster="a", job=~"dcgm.*" (name, = != =~ !~, a quoted value)',
                          selector)
    hosts = _string_list(r, "hosts")
    for host in hosts:
        if not _HOST_NAME.match(host):
            raise ConfigError(file, r.key("hosts"), "host names (letters, digits and . _ - @ : only)", host)
    d = PrometheusSource(name, url)
    interval = r.duration("interval", d.interval)
    timeout = r.duration("timeout", d.timeout)
    backfill = r.integer("backfill", d.backfill, 0, 1000)
    r.finish()
    return PrometheusSource(name, url, selector.rstrip(", "), tuple(dict.fromkeys(hosts)), interval, timeout,
                            backfill)


def _source_by_name(value: Any, sources: dict[str, PrometheusSource], file: str, key: str) -> PrometheusSource:
    if isinstance(value, str) and value in sources:
        return sources[value]
    names = ", ".join(sorted(sources)) or "none defined"
    raise ConfigError(file, key, f"the name of a [[sources]] entry ({names})", value)


def _parse_export(data: dict, file: str, warnings: list[str]) -> ExportSettings:
    r = _Reader(data.get("export", {}), file, "export", warnings)
    d = ExportSettings()
    settings = ExportSettings(ended_job_ttl=r.duration("ended_job_ttl", d.ended_job_ttl))
    r.finish()
    return settings

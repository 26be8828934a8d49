"""One host's doctor run: each step reached in turn, every step after a failure skipped with why.

Reachability is a plain TCP connect (and the server's banner); the SSH login tells the host key and
authentication apart; then the real probe is started the way the dashboard starts it, its hello and
first samples give the Python, GPU source and clock, and the `pyspy_locate` op gives py-spy and
ptrace facts. Channel headroom opens extra session channels on the same connection until the
server refuses (or a small bound), then closes every one of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time

from ..actions.pyspy_binary import PyspyUnavailable, local_pyspy
from ..config_records import HostConfig, Settings
from ..feeds.hostsession import HostSession
from ..model import HostSample
from ..requests import RequestError
from ..transport.failure import ConnectFailure
from ..vocab import HOST_TERMINAL_STATES
from .checks import CHECK_NAMES, FAIL, PASS, SKIP, WARN, Check, HostReport, skipped_after

# Extra session channels opened to measure headroom: enough to tell "none" and "few" from "plenty"
# without taking a shared server's slots for long (OpenSSH's MaxSessions defaults to 10).
HEADROOM_BOUND = 4
HEADROOM_WARN_BELOW = 2
SKEW_WARN_S = 2.0
SKEW_FAIL_S = 60.0
SAMPLES_FOR_SKEW = 3


class _Sink:
    """Receives the session's reports: state changes and samples (with our clock at arrival)."""

    def __init__(self) -> None:
        self.state = "connecting"
        self.error: str | None = None
        self.hint: str | None = None
        self.skews: list[float] = []
        # The GPU source as the samples report it: a source that starts and then fails (nvidia-smi
        # exiting on a lost driver) says so only here, not in the hello.
        self.gpu_source: str | None = None
        self.gpu_error: str | None = None
        self.changed = asyncio.Event()

    def host_state(self, host, state, error, hint, retry_at=None) -> None:
        self.state, self.error, self.hint = state, error, hint
        self.changed.set()

    def host_sample(self, host: str, sample: HostSample) -> None:
        self.skews.append(sample.time - time.time())
        self.gpu_source, self.gpu_error = sample.gpu_source, sample.gpu_error
        self.changed.set()


def doctor_settings(settings: Settings) -> Settings:
    # Samples twice a second at most: the clock check needs a few, and the run should be short.
    return dataclasses.replace(settings, sample_interval=min(settings.sample_interval, 0.5))


async def diagnose_host(host: HostConfig, settings: Settings, connector) -> HostReport:
    checks: list[Check] = []

    def rest(after: str) -> tuple[str, ...]:
        return CHECK_NAMES[CHECK_NAMES.index(after) + 1:]

    conn = None
    if host.local:
        checks += [Check(n, SKIP, "this machine: no SSH") for n in ("reachability", "host-key", "authentication")]
    else:
        reach = await check_reachability(host, settings, connector)
        checks.append(reach)
        if reach.status == FAIL:
            return HostReport(host.name, tuple(checks + skipped_after(rest("reachability"), "host not reachable")))
        login = await check_login(host, connector)
        checks += login[0]
        conn = login[1]
        if conn is None:
            done = {c.name for c in checks}
            return HostReport(host.name, tuple(checks + skipped_after(
                tuple(n for n in CHECK_NAMES if n not in done), "no SSH login")))
    sink = _Sink()
    session = HostSession(host, doctor_settings(settings), connector, sink)
    if conn is not None:
        session.channel.conn = conn  # the probe runs on the connection we just checked
    session.start()
    try:
        checks += await _probe_checks(host, settings, session, sink)
        if conn is not None and session.link is not None:
            checks.append(await check_headroom(conn, settings.connect_timeout))
        elif not host.local:
            checks.append(Check("channel-headroom", SKIP, "no probe running"))
        else:
            checks.append(Check("channel-headroom", SKIP, "this machine: no SSH"))
        checks.append(clock_check(sink.skews) if sink.skews else Check("clock-skew", SKIP, "no sample arrived"))
    finally:
        await session.stop()  # closes the probe and the connection
    return HostReport(host.name, tuple(checks))


# -- reachability ---------------------------------------------------------------------------
async def check_reachability(host: HostConfig, settings: Settings, connector) -> Check:
    target = host.host or host.ssh
    jump = connector.jump_for(host)
    if jump:
        return Check("reachability", SKIP, f"reached through jump host {jump}: the login below checks the path")
    try:
        address, port = connector.resolved_target(host)
    except Exception as exc:  # a broken ssh config: asyncssh says what
        return Check("reachability", FAIL, f"ssh config for {target!r} could not be read: {exc}",
                     "fix the ssh config entry for this host")
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(address, port), settings.connect_timeout)
    except (asyncio.TimeoutError, TimeoutError):
        return Check("reachability", FAIL, f"no answer from {address}:{port} within {settings.connect_timeout:g}s",
                     "check that the host is up and that no firewall drops port " f"{port}",
                     {"address": address, "port": port})
    except ConnectionRefusedError:
        return Check("reachability", FAIL, f"connection refused by {address}:{port}",
                     "check that sshd runs on the host and listens on port " f"{port}",
                     {"address": address, "port": port})
    except OSError as exc:
        return Check("reachability", FAIL, f"TCP connect to {address}:{port} failed: {exc.strerror or exc}",
                     "check the host name, the port and that sshd runs on the host",
                     {"address": address, "port": port})
    connect_ms = (time.monotonic() - started) * 1000
    banner = ""
    try:
        line = await asyncio.wait_for(reader.readline(), settings.connect_timeout)
        banner = line.decode("ascii", "replace").strip()[:100]
    except (asyncio.TimeoutError, TimeoutError, OSError):
        pass
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 1)
        except Exception:
            pass
    facts = {"address": address, "port": port, "connect_ms": round(connect_ms, 1), "banner": banner}
    if not banner.startswith("SSH-"):
        return Check("reachability", FAIL, f"{address}:{port} accepted the connection but sent no SSH banner",
                     "check that the port is sshd's (not another service)", facts)
    return Check("reachability", PASS, f"{address}:{port} answers in {connect_ms:.0f} ms ({banner})", "", facts)


# -- host key and authentication ------------------------------------------------------------
async def check_login(host: HostConfig, connector) -> tuple[list[Check], object | None]:
    try:
        conn = await connector.connect(host)
    except ConnectFailure as failure:
        if failure.state in ("host-key-unknown", "host-key-changed"):
            return [Check("host-key", FAIL, failure.reason, failure.hint or "",
                          {"state": failure.state.removeprefix("host-key-")}),
                    Check("authentication", SKIP, "not tried: the host key is not trusted")], None
        key = Check("host-key", PASS, "known (the server passed the key check)", "", {"state": "known"})
        if failure.state == "auth-failed":
            return [key, Check("authentication", FAIL, failure.reason, failure.hint or
                               "check identity_file / the ssh agent, and that the public key is in the "
                               "host's ~/.ssh/authorized_keys")], None
        return [Check("host-key", SKIP, "no key exchange"),
                Check("authentication", FAIL, f"SSH login failed: {failure.reason}", failure.hint or "")], None
    key = conn.get_server_host_key()
    fingerprint = key.get_fingerprint("sha256") if key is not None else None
    algorithm = key.get_algorithm() if key is not None else None
    user = conn.get_extra_info("username")
    return [Check("host-key", PASS, f"known: {algorithm} {fingerprint}", "",
                  {"state": "known", "fingerprint": fingerprint, "algorithm": algorithm}),
            Check("authentication", PASS, f"logged in as {user}", "", {"user": user})], conn


# -- the probe: Python, GPU source, py-spy, ptrace -----------------------------------------
async def _wait_probe(session: HostSession, sink: _Sink, limit: float) -> None:
    """Until SAMPLES_FOR_SKEW samples came, or the session failed for good, or `limit` passed."""
    deadline = time.monotonic() + limit
    while len(sink.skews) < SAMPLES_FOR_SKEW and sink.state not in HOST_TERMINAL_STATES:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sink.changed.clear()
        try:
            await asyncio.wait_for(sink.changed.wait(), left)
        except asyncio.TimeoutError:
            return


async def _probe_checks(host: HostConfig, settings: Settings, session: HostSession, sink: _Sink) -> list[Check]:
    await _wait_probe(session, sink, settings.connect_timeout + 15)
    hello = session.hello
    if hello is None:
        why = sink.error or f"no answer from the probe (state {sink.state})"
        fix = sink.hint or f"check that `{host.python}` (Python 3.6 or newer) runs on the host"
        return [Check("python", FAIL, f"the probe did not start: {why}", fix)] + skipped_after(
            ("gpu-source", "py-spy", "ptrace"), "no probe running")
    checks = [Check("python", PASS, f"Python {hello.get('python')} ({host.python}) runs the probe", "",
                    {"version": hello.get("python"), "interpreter": host.python, "hostname": hello.get("hostname")})]
    checks.append(gpu_check(hello.get("gpu_source"), hello.get("gpu_error"),
                            sink.gpu_error if sink.skews else None, sink.gpu_source))
    try:
        located = await session.request("pyspy_locate", _pyspy_args(), timeout=settings.connect_timeout + 5)
    except RequestError as exc:
        return checks + [Check("py-spy", WARN, f"could not ask the probe: {exc}"),
                         Check("ptrace", SKIP, "no answer from the probe")]
    checks.append(pyspy_check(located))
    checks.append(ptrace_check(located))
    return checks


def _pyspy_args() -> dict:
    try:
        mine = local_pyspy()
    except PyspyUnavailable:
        return {}
    return {"sha256": mine.sha256, "name": mine.cache_name}


# What the probe says of a GPU source that is not there at all (a host without GPUs: a clean state).
_ABSENT = ("not found", "not on PATH", "no devices were found")


def source_fails(error: str | None) -> bool:
    """True when a GPU source is there but fails (nvidia-smi exiting on a lost driver, NVML erroring),
    not merely absent: every part of the probe's error ("NVML: ...; nvidia-smi: ...") is checked."""
    if not error:
        return False
    return any(not any(word.lower() in part.lower() for word in _ABSENT) for part in error.split("; "))


def gpu_check(source: str | None, error: str | None, sample_error: str | None = None,
              sample_source: str | None = None) -> Check:
    """The hello's GPU source; a fail when the source is there but fails, in its own words."""
    facts = {"source": source, "error": error}
    failing = sample_error if source_fails(sample_error) else error if source_fails(error) else None
    if failing:
        facts["sample_error"] = sample_error
        return Check("gpu-source", FAIL, f"the GPU source fails: {failing}",
                     "check the driver on the host (nvidia-smi there says the same); until it recovers the "
                     "dashboard shows this host's GPUs as unknown", facts)
    if source == "nvml":
        return Check("gpu-source", PASS, "NVML", "", facts)
    if source == "nvidia-smi":
        why = f" (NVML: {error})" if error else ""
        return Check("gpu-source", PASS, f"nvidia-smi{why}", "", facts)
    return Check("gpu-source", WARN, f"no GPU source: {error or 'neither NVML nor nvidia-smi found'}",
                 "on a GPU host, install the NVIDIA driver (libnvidia-ml / nvidia-smi) or set gpu_source", facts)


def pyspy_check(located: dict) -> Check:
    machine = located.get("machine")
    facts = {"path": located.get("path"), "cached": located.get("cached"), "machine": machine}
    if located.get("path"):
        return Check("py-spy", PASS, f"present at {located['path']}", "", facts)
    if located.get("cached"):
        return Check("py-spy", PASS, f"uploaded copy at {located['cached']}", "", facts)
    try:
        mine = local_pyspy()
        mine.check_runs_on(machine or "")
    except PyspyUnavailable as exc:
        return Check("py-spy", WARN, f"not on the host and not uploadable: {exc}",
                     "install py-spy on the host (pip install py-spy) to dump stacks", facts)
    facts["uploadable"] = {"machine": mine.machine, "size": mine.size}
    return Check("py-spy", PASS, f"not on the host; the local {mine.machine} binary "
                 f"({mine.size / 1e6:.1f} MB) is uploaded on the first dump", "", facts)


def ptrace_check(located: dict) -> Check:
    scope = located.get("ptrace_scope")
    root, cap = bool(located.get("root")), bool(located.get("cap_sys_ptrace"))
    container = bool(located.get("container"))
    facts = {"ptrace_scope": scope, "root": root, "cap_sys_ptrace": cap, "container": container,
             "uid": located.get("uid")}
    if root and (cap or not container):
        return Check("ptrace", PASS, "logged in as root" + (" with CAP_SYS_PTRACE" if cap else ""), "", facts)
    if root:
        return Check("ptrace", WARN, "root in a container without CAP_SYS_PTRACE",
                     "start the container with --cap-add SYS_PTRACE to dump stacks", facts)
    if cap:
        return Check("ptrace", PASS, "CAP_SYS_PTRACE held", "", facts)
    if scope is None or scope == 0:
        where = "no Yama" if scope is None else "kernel.yama.ptrace_scope = 0"
        return Check("ptrace", PASS, f"{where}: your own processes can be dumped", "", facts)
    if scope == 1:
        return Check("ptrace", WARN, "kernel.yama.ptrace_scope = 1: only a parent may trace, py-spy dumps will "
                     "be refused", "sysctl kernel.yama.ptrace_scope=0 on the host, or log in as root", facts)
    if scope == 2:
        return Check("ptrace", WARN, "kernel.yama.ptrace_scope = 2: admin only",
                     "log in as root or grant CAP_SYS_PTRACE to dump stacks", facts)
    return Check("ptrace", WARN, f"kernel.yama.ptrace_scope = {scope}: ptrace disabled until reboot",
                 "stack dumps are impossible on this host until it reboots with a lower ptrace_scope", facts)


# -- channel headroom -----------------------------------------------------------------------
async def check_headroom(conn, timeout: float, bound: int = HEADROOM_BOUND) -> Check:
    """Open up to `bound` extra session channels, then close all (transport.ssh_headroom)."""
    from ..transport.ssh_headroom import session_headroom  # asyncssh: only once a host is reached over SSH

    headroom = await session_headroom(conn, bound, timeout)
    if headroom.error is not None:
        return Check("channel-headroom", WARN, f"could not test: {headroom.error}")
    free, refused = headroom.opened, headroom.refused
    facts = {"extra_sessions_opened": free, "bound": bound, "refused": refused}
    if refused is None:
        return Check("channel-headroom", PASS, f"{free} more session channels open beside the probe's "
                     f"(tested up to {bound})", "", facts)
    limit = free + 1  # the probe's own channel counts
    facts["max_sessions_seen"] = limit
    summary = f"the server refused session {limit + 1} ({refused}): MaxSessions is about {limit}"
    fix = ("raise MaxSessions in the host's sshd_config (default 10); other gpuwatch instances and "
           "multiplexed ssh sessions share these slots")
    if free == 0:
        return Check("channel-headroom", FAIL, summary + ", the probe takes the last one", fix, facts)
    if free < HEADROOM_WARN_BELOW:
        return Check("channel-headroom", WARN, summary, fix, facts)
    return Check("channel-headroom", PASS, summary, "", facts)


# -- clock ----------------------------------------------------------------------------------
def clock_check(skews: list[float]) -> Check:
    skew = statistics.median(skews)
    facts = {"skew_s": round(skew, 3), "samples": len(skews)}
    words = f"host clock {'ahead' if skew >= 0 else 'behind'} by {abs(skew):.2f}s"
    fix = "sync the host's clock (NTP, e.g. chrony or systemd-timesyncd): phase times and ages depend on it"
    if abs(skew) >= SKEW_FAIL_S:
        return Check("clock-skew", FAIL, words, fix, facts)
    if abs(skew) >= SKEW_WARN_S:
        return Check("clock-skew", WARN, words, fix, facts)
    return Check("clock-skew", PASS, words, "", facts)

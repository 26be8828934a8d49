"""The dashboard in a real pty: not one of a hostile host's bytes reaches the terminal raw.

A real sshd host runs a job whose script is named with OSC 2 (`t\\e]2;PWNED\\a.py`) and whose argv holds
OSC 52, OSC 8, DCS, C1 controls, RLO and a zalgo run; the fake nvidia-smi puts it on a GPU named with
escapes, so it is discovered (its name is the script's). `gpuwatch` runs in a pty (os.openpty via
pty.fork) and every byte it writes is kept: the dashboard (jobs table, GPU grid), the job pane (Enter),
the kill dialog (K, then n), quit. Textual's own escape sequences are of course there; the host's
payloads must not be, and their visible forms (`␛]2;PWNED`) must.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.core.helpers import host_entry, settings_for, write_toml

from .hostile_strings import C1, DCS, OSC8, OSC52, RLO, ZALGO

pytestmark = pytest.mark.ssh

ROOT = Path(__file__).resolve().parents[2]
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
OSC2_NAME = "t\x1b]2;PWNED\x07.py"
# The host's bytes as they would arrive raw (UTF-8 for C1 and RLO, as a terminal reads them).
RAW = {
    "OSC 2": b"\x1b]2;PWNED", "BEL after the title": b"PWNED\x07", "OSC 52": b"\x1b]52;", "OSC 8": b"\x1b]8;;https://evil",
    "DCS": b"\x1bP+q", "C1 CSI": "\x9b".encode(), "C1 OSC": "\x9d".encode(), "C1 ST": "\x9c".encode(),
    "RLO": "\u202e".encode(), "zalgo run": ("\u0301" * 5).encode(), "GPU name OSC": b"\x1b]2;GPU",
}


class Pty:
    def __init__(self, argv, env, cols=160, rows=48):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the dashboard, in the pty
            os.execve(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.data = bytearray()

    def read_until(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(bytes(self.data)):
                return
            self.pump(0.2)
        if os.environ.get("PTY_DUMP"):
            Path(os.environ["PTY_DUMP"]).write_bytes(bytes(self.data))
        raise AssertionError(f"timed out waiting for {what}; last output: {bytes(self.data[-1500:])!r}")

    def pump(self, wait: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if ready:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            self.data += chunk

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            self.pump(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def hostile_job(tmp_path):
    script = tmp_path / OSC2_NAME
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    # Run from its directory (a short command line): the dialog shows as much of it as fits its card.
    argv = [os.fsencode(a) for a in (PY, OSC2_NAME, OSC8, OSC52, DCS, C1, RLO, ZALGO, "hostile-marker")]
    p = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         start_new_session=True)
    yield p
    if p.poll() is None:
        p.kill()
    p.wait(5)


def test_no_host_byte_reaches_the_terminal_raw(sshd_factory, ssh_env, tmp_path, hostile_job):
    (host,) = sshd_factory(1)
    host.set_scenario(gpus=1, phase="training", fields={"name": "NVIDIA \x1b]2;GPU\x07 H200 \u202eX"},
                      processes=[{"gpu": 0, "pid": hostile_job.pid, "used_memory_mib": 1000}])
    config = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env, sample_interval=0.5), [host_entry(host)])
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL")}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"), XDG_STATE_HOME=str(tmp_path / "st"),
               PYTHONPATH=str(ROOT / "src"), TERM="xterm-256color")
    term = Pty([sys.executable, "-m", "gpuwatch_tui.cli", "--config", str(config)], env)
    try:
        # (Rich drops BEL, BS, VT, FF and CR from text itself: the title's BEL is gone, not shown.)
        shown = "t␛]2;PWNED".encode()
        term.read_until(lambda d: shown in d and "␛]2;GPU".encode() in d, 60, "the job and its GPU on the dashboard")
        # The machine runs other jobs too (the sshd host is this machine): keep only ours with the filter.
        term.send(b"/")
        term.read_until(lambda d: b"filter hosts and jobs" in d, 10, "the filter")
        term.send(b"pwned\r")
        term.pump(1.0)
        term.send(b"\r")  # the job pane
        term.read_until(lambda d: d.count(shown) >= 2 and "␛]8;;https://evil".encode() in d, 30, "the job pane")
        before = len(term.data)
        term.send(b"K")  # the kill dialog (from the pane): the command line, in full
        term.read_until(lambda d: b"Cancel (n)" in d[before:], 30, "the kill dialog")
        term.read_until(lambda d: "␛]8;;https://evil.example/␛\\click".encode() in d[before:], 10,
                        "the argv in the dialog")
        term.send(b"n")
        term.pump(1.0)
        assert hostile_job.poll() is None  # cancelled: nothing was signalled
        term.send(b"q")
        term.pump(2.0)
    finally:
        term.close()
    data = bytes(term.data)
    found = {name: data.count(raw) for name, raw in RAW.items() if raw in data}
    assert not found, f"raw host bytes reached the terminal: {found}"

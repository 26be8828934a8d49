"""One smoke test in a real terminal: `gpuwatch --config F` in tmux against sshd test hosts.

Keys go in with `tmux send-keys`, the screen comes back with `tmux capture-pane`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.tmux, pytest.mark.ssh]


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(session: str, predicate, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = screen(session)
        except subprocess.CalledProcessError:  # the session ended
            return ""
        if predicate(text):
            return text
        time.sleep(0.1)
    raise AssertionError(f"timed out; the screen was:\n{text}")


def write_config(path: Path, ssh_env, hosts) -> Path:
    lines = ["[settings]", f'ssh_config = ["{ssh_env.ssh_config}"]', f'known_hosts = "{ssh_env.known_hosts}"',
             "sample_interval = 1", ""]
    for host in hosts:
        lines += ["[[hosts]]", f'name = "{host.name}"', f'ssh = "{host.name}"', ""]
    path.write_text("\n".join(lines))
    return path


@pytest.mark.parametrize("size,quit_key", [((200, 50), "q"), ((80, 24), "C-c")], ids=["200x50", "80x24"])
def test_dashboard_in_tmux(sshd_factory, ssh_env, tmp_path, size, quit_key):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    hosts = sshd_factory(2)
    config = write_config(tmp_path / "hosts.toml", ssh_env, hosts)
    session = f"gpuwatch-smoke-{os.getpid()}"
    env = ssh_env.environ()
    env["PYTHONPATH"] = str(ROOT / "src")
    env["TERM"] = "xterm-256color"  # what a plain SSH terminal reports; no COLORTERM=truecolor
    env.pop("COLORTERM", None)
    command = " ".join([sys.executable, "-m", "gpuwatch_tui.cli", "--config", str(config)])
    env_args = [f"{k}={v}" for k, v in env.items() if k in ("HOME", "PATH", "PYTHONPATH", "TERM", "LANG", "LC_ALL")]
    tmux("new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]), "env", *env_args,
         *command.split())
    try:
        text = wait_for(session, lambda s: all(h.name in s for h in hosts) and s.count("connected") >= 2)
        assert "Host" in text and "Job" in text  # the jobs table header
        assert "q Quit" in [line for line in text.splitlines() if line.strip()][-1]  # the footer, at 80 columns too
        if size[1] >= 50:  # the history under the grid sweeps: its head is marked
            wait_for(session, lambda s: "▲ now" in s)
        tmux("send-keys", "-t", session, "g")
        wait_for(session, lambda s: "no process holds a GPU" in s)  # these hosts have none: it says so
        tmux("send-keys", "-t", session, "g")
        wait_for(session, lambda s: "no process holds a GPU" not in s)
        tmux("send-keys", "-t", session, "?")
        wait_for(session, lambda s: "gpuwatch keys" in s)
        tmux("send-keys", "-t", session, "Escape")
        wait_for(session, lambda s: "gpuwatch keys" not in s)
        tmux("send-keys", "-t", session, "p")
        wait_for(session, lambda s: "PAUSED" in s)
        tmux("send-keys", "-t", session, "p")
        wait_for(session, lambda s: "PAUSED" not in s)
        tmux("send-keys", "-t", session, "/")
        wait_for(session, lambda s: "filter hosts and jobs" in s)  # typed on the summary line
        tmux("send-keys", "-t", session, "-l", hosts[0].name)
        grid_part = lambda s: s.split(" Host ")[0].split("\n", 1)[-1]  # below the host bar
        wait_for(session, lambda s: hosts[0].name in grid_part(s) and hosts[1].name not in grid_part(s))
        tmux("send-keys", "-t", session, "Escape")
        wait_for(session, lambda s: "filter hosts and jobs" not in s and hosts[1].name in grid_part(s))
        tmux("send-keys", "-t", session, "C-p")
        wait_for(session, lambda s: "🔎" in s or "Search for commands" in s)  # the palette is up
        tmux("send-keys", "-t", session, "Escape")
        wait_for(session, lambda s: "🔎" not in s and "Search for commands" not in s)
        tmux("send-keys", "-t", session, "t")
        wait_for(session, lambda s: "theme: gpuwatch-" in s)
        tmux("send-keys", "-t", session, quit_key)  # q, or ctrl+c as in htop, k9s and nvitop
        wait_for(session, lambda s: "connected" not in s, timeout=15)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)

"""Two "nodes" for multi-node tests: two real sshd test hosts (127.0.0.2, 127.0.0.3), each sshd in its
own PID namespace so each node's probe sees only that node's processes, and a real 2-node torchrun
(gloo on CPU, c10d rendezvous on 127.0.0.1) started with one agent per node through that node's sshd,
with the Slurm variables a launcher would set. Shared by the tests and benchmarks/bench_multinode_culprit.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.monitor import Monitor

from tests.core.helpers import host_entry, settings_for
from tests.support.net import free_port
from tests.support.sshd import MARKER_ENV, SshdHost

SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_steps.py"
# --kill-child: when the test stops the unshare process, its sshd (the namespace's pid 1) dies, and the
# kernel ends every process of that node with it.
UNSHARE = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--uts")
# Inside: the node's own hostname and an /etc/hosts (bound in its private mount namespace) that resolves
# every node, as on a cluster. Without its own hostname a node would give torchrun's rendezvous the same
# "hostname_pid" as the other (fresh PID namespaces hand out the same pids) and it would wait forever.
NODE_SETUP = 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"'
NODES = ("node-a", "node-b")
SLURM_JOB_ID = "4242"


def nodes_unavailable() -> str | None:
    """Why these tests cannot run here (they need root for PID namespaces, and torch), or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    if os.geteuid() != 0:
        return "PID namespaces for the test nodes need root"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed"
    return None


def start_nodes(sshd_factory, workdir: Path) -> list[SshdHost]:
    hosts = workdir / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.{2 + len(sshd_factory.hosts) + i} {name}\n"
                                                       for i, name in enumerate(NODES)))
    return [sshd_factory.create(name=name, fake_nvidia_smi=False,
                                command_prefix=[*UNSHARE, "sh", "-c", NODE_SETUP, name, str(hosts)])
            for name in NODES]


def monitor_for(ssh_env, nodes: list[SshdHost], stall_after: float) -> Monitor:
    cfg = parse_config({"settings": settings_for(ssh_env, stall_after=stall_after),
                        "hosts": [host_entry(n, gpu_source="none") for n in nodes]}, "multinode.toml")
    return Monitor(cfg)


@dataclass(frozen=True)
class Rank:
    """One rank as this machine sees it: its pid here and inside its node's namespace."""

    node: str
    pid: int  # on this machine
    ns_pid: int  # as its node (and gpuwatch) sees it
    create_time: float

    def alive(self) -> bool:
        try:
            p = psutil.Process(self.pid)
            return abs(p.create_time() - self.create_time) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def state(self) -> str:
        try:
            return psutil.Process(self.pid).status()
        except psutil.Error:
            return "gone"


def ns_pid(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^NSpid:\s+(.*)$", text, re.M).group(1).split()[-1])


def launch(ssh_env, nodes: list[SshdHost], run_dir: Path, nproc_per_node: int = 1, script: Path = SCRIPT,
           extra_env: dict[str, str] | None = None) -> int:
    """Start one torchrun agent per node over its sshd; returns the rendezvous port."""
    run_dir.mkdir(parents=True, exist_ok=True)
    port = free_port("127.0.0.1")
    for node_rank, node in enumerate(nodes):
        env = {"SLURM_JOB_ID": SLURM_JOB_ID, "SLURM_NODEID": str(node_rank), "SLURM_PROCID": str(node_rank),
               "SLURM_NNODES": "2", "OMP_NUM_THREADS": "1", **(extra_env or {})}
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node",
                str(nproc_per_node), "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id",
                f"slurm-{SLURM_JOB_ID}", "--max_restarts", "0", str(script)]
        log = run_dir / f"{node.name}.log"
        cmd = (f"cd {shlex.quote(str(run_dir))} || exit 1; {assigns} setsid nohup "
               f"{' '.join(map(shlex.quote, argv))} > {shlex.quote(str(log))} 2>&1 < /dev/null &")
        out = subprocess.run(["ssh", "-F", str(ssh_env.ssh_config), node.name, cmd], capture_output=True,
                             text=True, timeout=30, env=ssh_env.environ(), stdin=subprocess.DEVNULL)
        assert out.returncode == 0, f"launch on {node.name} failed: {out.returncode} {out.stderr}"
    return port


def ranks(nodes: list[SshdHost], timeout: float = 30.0, per_node: int = 1, script: Path = SCRIPT) -> list[Rank]:
    """The rank processes of each node (rank 0's node first), once all run."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for node in nodes:
            for p in node.marked_processes():
                try:
                    cmd = p.cmdline()
                    if str(script) in cmd and "torch.distributed.run" not in cmd:
                        found.append(Rank(node.name, p.pid, ns_pid(p.pid), p.create_time()))
                except (psutil.Error, OSError, AttributeError):
                    continue
        if len(found) == len(nodes) * per_node:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"rank processes did not start: {found}")
        time.sleep(0.1)


def steps_logged(run_dir: Path, node: str) -> int:
    try:
        return len(re.findall(r"\] step \d+", (run_dir / f"{node}.log").read_text(errors="replace")))
    except OSError:
        return 0


def all_processes(nodes: list[SshdHost]) -> list[psutil.Process]:
    """Every process of the run on any node (agents and ranks)."""
    out = []
    for node in nodes:
        for p in node.marked_processes():
            try:
                if any(str(SCRIPT.parent) in part for part in p.cmdline()):  # any script of this folder
                    out.append(p)
            except psutil.Error:
                continue
    return out


def stop_nodes(nodes: list[SshdHost]) -> None:
    """End each node at once: SIGKILL its unshare process (by pid), which takes its sshd (the namespace's
    pid 1) and so every process of that node with it. unshare ignores SIGTERM while it waits for its
    child, so the sshd host's own stop() would wait its full timeout for each node."""
    for node in nodes:
        proc = node._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        node.stop()


def stop_run(nodes: list[SshdHost]) -> None:
    """SIGKILL what is left of the run, by pid (SIGCONT first: a stopped process keeps its signals)."""
    for p in all_processes(nodes):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass


__all__ = ["MARKER_ENV", "Rank", "launch", "monitor_for", "nodes_unavailable", "ranks", "start_nodes",
           "steps_logged", "stop_nodes", "stop_run", "all_processes"]

"""A real one-machine Slurm for the tests: munged, slurmctld and slurmd started from a temp dir.

munged runs with its own key and socket; slurm.conf points every daemon and client at them
(`AuthInfo=socket=...`), uses free high ports on 127.0.0.1, linuxproc process tracking and no
cgroups, and keeps its state and spool in the temp dir. One node, named `gwnode1`, addressed as
127.0.0.1. Clients find the config through $SLURM_CONF (`env()`). Every daemon is stopped by the pid
this module started (and job steps by the pids slurmd's children really have), never by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

from tests.support.net import free_port
from tests.support.procs import descendants, terminate, wait_until

NODE = "gwnode1"
PARTITION = "debug"
CLUSTER = "gwtest"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sacct")
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in _SBIN:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return None


def slurm_unavailable_reason() -> str | None:
    missing = [b for b in BINARIES if binary(b) is None]
    if missing:
        return ("Slurm is not installed (missing " + ", ".join(missing)
                + "; apt-get install slurmctld slurmd munge slurm-client)")
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root (slurmd must start jobs as the submitting user)"
    return None


class SlurmCluster:
    def __init__(self, workdir: Path, nodes: int = 1, node_prefix: dict[str, list[str]] | None = None,
                 node_hostname: dict[str, str] | None = None) -> None:
        """`nodes` > 1: more slurmd on this machine (gwnode1, gwnode2, ...), each on its own port, for
        multi-node jobs (`sbatch -N 2`); their processes all run here, so each node can be mapped to
        a test sshd host with [slurm.node_address]. `node_prefix[node]` runs that node's slurmd under a
        command (e.g. nsenter into a test node's namespaces, so its job steps live there), and
        `node_hostname[node]` is its NodeHostname (the host name it has there)."""
        self.dir = workdir
        self.node_prefix = node_prefix or {}
        self.node_hostname = node_hostname or {}
        self.node_names = [NODE] + [f"gwnode{i}" for i in range(2, nodes + 1)]
        self.node_ports = {name: free_port("127.0.0.1") for name in self.node_names}
        self.procs: dict[str, subprocess.Popen] = {}
        self.ctld_port = free_port("127.0.0.1")
        self.slurmd_port = free_port("127.0.0.1")
        self.munge_socket = workdir / "munge" / "munge.socket"
        self.conf = workdir / "slurm.conf"
        self.state = workdir / "state"
        self.spool = workdir / "spool"
        self.jobs_dir = workdir / "jobs"

    # -- files ---------------------------------------------------------------------
    def _write_files(self) -> None:
        munge = self.munge_socket.parent
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for d in (self.state, self.spool, self.jobs_dir):
            d.mkdir(mode=0o755)
        self.jobs_dir.chmod(0o1777)
        host = socket.gethostname()
        self.conf.write_text("\n".join([
            f"ClusterName={CLUSTER}",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.state}",
            f"SlurmdSpoolDir={self.spool}/d-%n",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid",
            f"SlurmdPidFile={self.dir}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.dir}/slurmctld.log",
            f"SlurmdLogFile={self.dir}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/linear",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "MinJobAge=600",  # ended jobs stay in slurmctld's memory: scontrol answers for them
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=2",
            "SchedulerParameters=sched_interval=1",
            *(f"NodeName={name} NodeHostname={self.node_hostname.get(name, host)} NodeAddr=127.0.0.1 Port={self.node_ports[name]} CPUs=2 "
              "RealMemory=1000 State=UNKNOWN" for name in self.node_names),
            f"PartitionName={PARTITION} Nodes={','.join(self.node_names)} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        return env

    # -- daemons -------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.dir / f"{name}.out", "wb")
        # cwd = our temp dir: slurmstepd (which daemonizes away from slurmd and rewrites its environ)
        # inherits it, so at stop every process of this cluster is found by its cwd, none by name.
        self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env(), start_new_session=True, cwd=self.dir)
        log.close()

    def start(self, timeout: float = 30.0) -> "SlurmCluster":
        self._write_files()
        munge = self.munge_socket.parent
        self._spawn("munged", [binary("munged"), "-F", "--force", f"--socket={self.munge_socket}",
                               f"--key-file={munge / 'munge.key'}", f"--log-file={munge / 'munged.log'}",
                               f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}"])
        if not wait_until(lambda: self.munge_socket.exists(), 10, 0.05):
            raise RuntimeError("munged did not start: " + self._logs())
        self._spawn("slurmctld", [binary("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        for name in self.node_names:
            self._spawn(f"slurmd-{name}" if name != NODE else "slurmd",
                        [*self.node_prefix.get(name, ()), binary("slurmd"), "-D", "-N", name, "-f", str(self.conf)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.returncode}: " + self._logs())
            out = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False)
            states = out.stdout.split()
            if out.returncode == 0 and len(states) == len(self.node_names) and \
                    all(st in ("idle", "mixed", "allocated") for st in states):
                return self
            time.sleep(0.2)
        raise RuntimeError(f"the test Slurm's node did not come up in {timeout}s: " + self._logs())

    def _logs(self) -> str:
        parts = []
        for f in sorted(self.dir.glob("*.out")) + sorted(self.dir.glob("*.log")):
            parts.append(f"--- {f.name}\n{f.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)

    def processes_here(self) -> list[psutil.Process]:
        """Live processes whose working directory is inside this cluster's temp dir (slurmstepd, jobs)."""
        root = str(self.dir.resolve())
        me = os.getpid()
        out = []
        for proc in psutil.process_iter():
            try:
                if proc.pid == me or proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                cwd = proc.cwd()
            except (psutil.Error, OSError):
                continue
            if cwd == root or cwd.startswith(root + os.sep):
                out.append(proc)
        return out

    def stop(self) -> None:
        # Cancel what still runs while the daemons can, then stop them; slurmstepd daemonizes away from
        # slurmd and may outlive it: collect it (and the jobs' processes) by their cwd.
        if self.procs.get("slurmctld") is not None and self.procs["slurmctld"].poll() is None:
            try:
                ids = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout=10).stdout.split()
                if ids:
                    self.run(["scancel", *ids], check=False, timeout=10)
                    wait_until(lambda: not self.run(["squeue", "-h", "-o", "%i"], check=False).stdout.strip(), 10, 0.2)
            except (subprocess.SubprocessError, OSError):
                pass
        stray = []
        daemons = [n for n in self.procs if n.startswith("slurmd")] + ["slurmctld"]
        for name in daemons:
            proc = self.procs.get(name)
            if proc is not None:
                stray += descendants(proc.pid)
        for name in (*daemons, "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        terminate(stray + [p for p in self.processes_here() if p.pid not in {q.pid for q in stray}], 3.0)

    # -- clients -------------------------------------------------------------------
    def run(self, argv: list[str], check: bool = True, timeout: float = 20.0) -> subprocess.CompletedProcess:
        path = binary(argv[0]) or argv[0]
        out = subprocess.run([path, *argv[1:]], capture_output=True, text=True, env=self.env(), timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{argv} exited {out.returncode}: {out.stderr}")
        return out

    def sbatch(self, *args: str, script: str) -> str:
        """Submit a batch script; returns the job id."""
        path = self.jobs_dir / f"job-{time.monotonic_ns()}.sh"
        path.write_text("#!/bin/sh\n" + script + "\n")
        out = self.run(["sbatch", "--parsable", f"--chdir={self.jobs_dir}", *args, str(path)])
        return out.stdout.strip().split(";")[0]

    def job_state(self, job_id: str) -> str:
        out = self.run(["scontrol", "show", "job", "-o", job_id], check=False)
        for word in out.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return ""

    def wait_state(self, job_id: str, states: set[str], timeout: float = 30.0) -> str:
        last = ""

        def reached() -> bool:
            nonlocal last
            last = self.job_state(job_id)
            return last in states

        if not wait_until(reached, timeout, 0.2):
            raise AssertionError(f"job {job_id} did not reach {sorted(states)} in {timeout}s (last: {last!r})\n"
                                 + self._logs())
        return last

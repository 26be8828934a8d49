"""Real watched jobs and an 8-GPU nvidia-smi stand-in, shared by the probe and core benchmarks.

Each job is a real Python process with a child, its stdout going to a log file (line-buffered by
-u, as torchrun starts its ranks) that the probe tails: training-like lines, one a second by default. The
stand-in (tests/support/fake_nvidia_smi.py, CSV recorded on an H200) puts job i on GPU i.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv  # noqa: E402

JOB_PROGRAM = r"""
import subprocess, sys, time, random
child = subprocess.Popen(["sleep", "3600"])  # a worker, as a DataLoader or compile pool would be
step = 0
while True:
    step += 1
    print("step %d/100000 loss %.4f lr 3.0e-04 tokens/s %d" % (step, 2.5 / (1 + step / 500.0), random.randint(90000, 110000)))
    time.sleep(float(sys.argv[1]))
"""


class JobFleet:
    """`n` real jobs with logs, and a stand-in nvidia-smi that shows them on `gpus` GPUs."""

    def __init__(self, base: Path, n: int = 8, gpus: int = 8, lines_per_s: float = 1.0) -> None:
        from tests.support.fake_nvidia_smi import install_fake_nvidia_smi
        from tests.support.fake_smi_scenario import write_scenario

        self.base = base
        self.bindir = base / "bin"
        self.bindir.mkdir(parents=True, exist_ok=True)
        install_fake_nvidia_smi(self.bindir)
        self.jobs: list[int] = []  # pids
        self.logs: list[Path] = []
        for i in range(n):
            log = base / f"job-{i}" / "train.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            # Started like `nohup python -u train.py > train.log 2>&1 &` from a shell that then
            # exits: each job is its own tree (its parent is init), not one launcher's ranks.
            (log.parent / "train.py").write_text(JOB_PROGRAM)
            shell = subprocess.run(
                ["sh", "-c", 'nohup "$0" -u train.py "$1" > train.log 2>&1 < /dev/null & echo $!',
                 sys.executable, str(1.0 / lines_per_s)],
                cwd=log.parent, stdout=subprocess.PIPE, check=True, text=True)
            self.jobs.append(int(shell.stdout.strip()))
            self.logs.append(log)
        self.scenario = base / "scenario.json"
        write_scenario(self.scenario, gpus=gpus, phase="training", uuid_prefix="GPU-bench",
                       processes=[{"gpu": i % gpus, "pid": pid, "used_memory_mib": 70000 + i}
                                  for i, pid in enumerate(self.jobs)])

    @property
    def pids(self) -> list[int]:
        return list(self.jobs)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{self.bindir}:{env.get('PATH', '/usr/bin:/bin')}"
        env["GPUWATCH_FAKE_SMI"] = str(self.scenario)
        return env

    def tails(self) -> dict[str, str]:
        return {f"job{i}": str(p) for i, p in enumerate(self.logs)}

    def start_probe(self, interval: float, gpu_source: str = "nvidia-smi", fact_deltas: bool = True,
                    env: dict[str, str] | None = None) -> subprocess.Popen:
        """`env`: the probe's environment (default: self.env(), the nvidia-smi stand-in on PATH)."""
        proc = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=self.env() if env is None else env)
        # fact_deltas: as gpuwatch asks for it (fixed process facts only when they change)
        proc.stdin.write(build_payload({"interval": interval, "gpu_source": gpu_source, "fact_deltas": fact_deltas}))
        proc.stdin.flush()
        return proc

    def stop(self) -> None:
        # Only what we started, by pid: each job and its child.
        for pid in self.jobs:
            for victim in [*_children(pid), pid]:
                try:
                    os.kill(victim, 9)
                except OSError:
                    pass


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def send(proc: subprocess.Popen, request: dict) -> None:
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

"""End-to-end harness: real scenario processes started over SSH on the sshd test hosts the way
people start jobs, observed through a real `gpuwatch watch --json` subprocess.

    run = launch(ssh_env, host, run_dir, "hang.py", "--steps", "3")      # nohup ... > train.log 2>&1 &
    watch = Watch.start(write_config(...), ssh_env)                       # gpuwatch watch --json
    track = watch.wait_for(lambda w: w.job_of(run.pid), "hang.py discovered")

Every process started here is stopped by pid (pinned to its start time) in `stop()` / `Runs.stop_all()`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from tests.core.helpers import toml_value
from tests.support.procs import ProcRef

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "tests" / "scenarios"
# The interpreter running the tests: the venv's, so torch is there for compile.py.
PYTHON = sys.executable


def write_config(path: Path, ssh_env, hosts, jobs=(), **settings) -> Path:
    """A gpuwatch config: hosts reached through their alias in the fixture's ssh config."""
    s = {
        "sample_interval": 0.5,
        "stall_after": "6s",
        "connect_timeout": 5,
        "reconnect_initial_delay": 0.2,
        "reconnect_max_delay": 1.0,
        "ssh_config": [str(ssh_env.ssh_config)],
        "known_hosts": str(ssh_env.known_hosts),
    }
    s.update(settings)
    lines = ["[settings]", *(f"{k} = {toml_value(v)}" for k, v in s.items())]
    for h in hosts:
        lines += ["", "[[hosts]]", f"name = {toml_value(h.name)}", f"ssh = {toml_value(h.name)}",
                  'gpu_source = "nvidia-smi"']
    for j in jobs:
        lines += ["", "[[jobs]]", *(f"{k} = {toml_value(v)}" for k, v in j.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- scenario runs
@dataclass
class Run:
    host: object  # SshdHost
    script: str
    dir: Path
    ref: ProcRef

    @property
    def pid(self) -> int:
        return self.ref.pid

    @property
    def log(self) -> Path:
        return self.dir / "train.log"

    def alive(self) -> bool:
        return self.ref.alive()

    def stop(self) -> None:
        stop_refs([self.ref])


def stop_refs(refs: list[ProcRef], timeout: float = 5.0) -> None:
    """SIGKILL each pinned pid (and its descendants), then wait until they are gone."""
    for ref in refs:
        p = ref.process()
        if p is None:
            continue
        try:
            kids = p.children(recursive=True)
        except psutil.Error:
            kids = []
        for k in [p, *kids]:
            try:
                k.kill()
            except psutil.Error:
                pass
    deadline = time.monotonic() + timeout
    while any(r.alive() for r in refs) and time.monotonic() < deadline:
        time.sleep(0.05)


def launch(ssh_env, host, run_dir: Path, script: str, *args: str, unbuffered: bool = False,
           env: dict[str, str] | None = None, launcher: tuple[str, ...] = ()) -> Run:
    """Copy the scenario into run_dir and start it there over a real ssh session:
    `cd DIR; setsid nohup PYTHON SCRIPT ARGS > train.log 2>&1 < /dev/null &` (no -u unless asked).
    `launcher` goes between the interpreter and the script (`-m torch.distributed.run ...`): the run's
    pid is then the launcher's."""
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCENARIOS / "_common.py", run_dir / "_common.py")
    shutil.copy(SCENARIOS / script, run_dir / script)
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    py = PYTHON + (" -u" if unbuffered else "") + "".join(" " + shlex.quote(a) for a in launcher)
    cmd = (f"cd {shlex.quote(str(run_dir))} || exit 1; {assigns} setsid nohup {py} "
           f"{shlex.quote(str(run_dir / script))} {' '.join(map(shlex.quote, args))} "
           f"> train.log 2>&1 < /dev/null & echo $!")
    out = subprocess.run(["ssh", "-F", str(ssh_env.ssh_config), host.name, cmd], capture_output=True, text=True,
                         timeout=30, env=ssh_env.environ(), stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"launch over ssh failed: {out.returncode} {out.stderr}"
    pid = int(out.stdout.split()[-1])
    ref = _python_of(pid, str(run_dir / script))
    assert ref is not None, f"{script}: no python process for pid {pid}"
    return Run(host, script, run_dir, ref)


def _python_of(pid: int, script: str, timeout: float = 10.0) -> ProcRef | None:
    """The scenario's own python process: pid itself once nohup has exec'd, or a child of it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            p = psutil.Process(pid)
            for cand in [p, *p.children(recursive=True)]:
                cmd = cand.cmdline()
                if script in cmd and cmd and "python" in os.path.basename(cmd[0]):
                    return ProcRef.of(cand)
        except psutil.Error:
            return None
        time.sleep(0.02)
    return None


# --------------------------------------------------------------------------- the watch process
@dataclass
class Track:
    """Everything one job showed over the watch: collapsed (phase, detail) sequence and evidence."""

    id: str
    seq: list[tuple[str, str | None]] = field(default_factory=list)
    evidence: set[str] = field(default_factory=set)
    last: dict = field(default_factory=dict)
    first: dict = field(default_factory=dict)  # the job as it was first published
    first_seen: float = 0.0
    seen: int = 0

    @property
    def phases(self) -> list[str]:
        out: list[str] = []
        for p, _ in self.seq:
            if not out or out[-1] != p:
                out.append(p)
        return out

    @property
    def phase(self) -> str | None:
        return self.last.get("phase")

    @property
    def detail(self) -> str | None:
        return self.last.get("detail")

    def has(self, phase: str, detail: str | None = None) -> bool:
        return any(p == phase and (detail is None or d == detail) for p, d in self.seq)

    def describe(self) -> str:
        ev = "; ".join(self.last.get("evidence", []))
        return (f"{self.last.get('name')} pids={self.last.get('pids')} seq={self.seq} "
                f"last=({self.phase}, {self.detail}) evidence=[{ev}]")


class Watch:
    """`python -m gpuwatch_tui.cli watch --json --config F`, read line by line in a thread."""

    def __init__(self, proc: subprocess.Popen, stderr_path: Path):
        self.proc = proc
        self.stderr_path = stderr_path
        self.tracks: dict[str, Track] = {}
        self.snapshots = 0
        self.last: dict = {}
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, config: Path, ssh_env, stderr_path: Path) -> "Watch":
        env = ssh_env.environ()
        env.pop("PYTHONUNBUFFERED", None)
        errf = open(stderr_path, "wb")
        proc = subprocess.Popen([PYTHON, "-m", "gpuwatch_tui.cli", "watch", "--json", "--config", str(config)],
                                stdout=subprocess.PIPE, stderr=errf, stdin=subprocess.DEVNULL, env=env,
                                cwd=str(REPO))
        errf.close()
        return cls(proc, stderr_path)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                snap = json.loads(raw)
            except ValueError as exc:
                self.errors.append(f"bad JSON line: {exc}: {raw[:200]!r}")
                continue
            now = time.monotonic()
            with self.lock:
                self.snapshots += 1
                self.last = snap
                for job in snap.get("jobs", []):
                    t = self.tracks.get(job["id"])
                    if t is None:
                        t = self.tracks[job["id"]] = Track(job["id"], first=job, first_seen=now)
                    t.seen += 1
                    t.last = job
                    key = (job["phase"], job["detail"])
                    if not t.seq or t.seq[-1] != key:
                        t.seq.append(key)
                    t.evidence.update(job.get("evidence", []))

    # -- queries (all under the lock) ------------------------------------------------------------
    def job_of(self, pid: int) -> Track | None:
        with self.lock:
            return next((t for t in self.tracks.values() if pid in t.last.get("pids", [])), None)

    def jobs_of(self, pids) -> list[Track]:
        """Every job ever published that held one of these pids (a per-rank split shows as several)."""
        pids = set(pids)
        with self.lock:
            return [t for t in self.tracks.values()
                    if pids & set(t.last.get("pids", [])) or pids & set(t.first.get("pids", []))]

    def job_named(self, name: str, host: str | None = None) -> Track | None:
        with self.lock:
            return next((t for t in self.tracks.values() if t.last.get("name") == name
                         and (host is None or t.last.get("host") == host)), None)

    def host(self, name: str) -> dict:
        with self.lock:
            return next((h for h in self.last.get("hosts", []) if h.get("name") == name), {})

    def wait_for(self, pred: Callable[["Watch"], object], what: str, timeout: float = 30.0,
                 explain: Callable[[], str] | None = None):
        deadline = time.monotonic() + timeout
        while True:
            value = pred(self)
            if value:
                return value
            if self.proc.poll() is not None:
                raise AssertionError(f"gpuwatch watch exited ({self.proc.returncode}) while waiting for {what}:\n"
                                     + self.stderr_tail())
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n"
                                     + (explain() if explain else self.describe()))
            time.sleep(0.1)

    def describe(self) -> str:
        with self.lock:
            return "\n".join(t.describe() for t in self.tracks.values()) or "(no jobs)"

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text()[-3000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._thread.join(5)

"""Real processes seen through the real probe: a torch job is a job from its first samples (before any
GPU use), a Python without torch is not, and a short first torch.compile is seen as `compiling` every time."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker

from .probe_loop import ProbeLoop

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture
def started():
    """Processes the test started (psutil.Process, pinned to their start time); killed by pid at the end."""
    procs: list[psutil.Process] = []
    yield procs
    for p in procs:
        try:
            if p.is_running():
                for k in p.children(recursive=True):
                    k.kill()
                p.kill()
        except psutil.Error:
            pass


def nohup(run_dir: Path, argv: list[str], started: list, env: dict[str, str] | None = None) -> psutil.Process:
    """`setsid nohup ARGV > train.log 2>&1 < /dev/null &` from a shell, as people start jobs; the
    shell exits, so the job's parent is init."""
    run_dir.mkdir(parents=True, exist_ok=True)
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    cmd = (f"cd {shlex.quote(str(run_dir))} || exit 1; {assigns} setsid nohup {' '.join(map(shlex.quote, argv))} "
           f"> train.log 2>&1 < /dev/null & echo $!")
    environ = dict(os.environ)
    environ.pop("PYTHONUNBUFFERED", None)
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30, env=environ,
                         stdin=subprocess.DEVNULL)
    proc = psutil.Process(int(out.stdout.split()[-1]))
    started.append(proc)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "python" not in os.path.basename((proc.cmdline() or [""])[0]):
        time.sleep(0.02)  # nohup has not exec'd the interpreter yet
    return proc


def job_of(tracker: JobTracker, pid: int):
    return next((v for v in tracker.views() if pid in v.to_json().get("pids", [])), None)


@needs_torch
def test_a_torch_job_is_a_job_before_any_gpu_use_and_a_plain_python_is_not(tmp_path, started):
    code = "import sys, time\n{imp}\nprint('ready', flush=True)\ntime.sleep(60)\n"
    torch_job = tmp_path / "with_torch" / "train.py"
    plain = tmp_path / "plain" / "tool.py"
    for path, imp in ((torch_job, "import torch"), (plain, "import json")):
        path.parent.mkdir(parents=True)
        path.write_text(code.format(imp=imp))
    tracker = JobTracker(JobSettings(stall_after_s=60))
    loop = ProbeLoop(tracker, interval=0.5)
    try:
        loop.step()
        job = nohup(torch_job.parent, [sys.executable, str(torch_job)], started)
        other = nohup(plain.parent, [sys.executable, str(plain)], started)
        t0 = time.monotonic()
        assert loop.run_until(lambda: job_of(tracker, job.pid) is not None, 30), "the torch job was never found"
        found_after = time.monotonic() - t0
        view = job_of(tracker, job.pid).to_json()
        assert view["name"] == "train.py"
        assert view["phase"] in ("starting", "loading", "unknown"), view
        assert view["gpus"] == [], view  # found with no GPU in sight: from its libraries and its log file
        assert "with_torch/train.log" in " ".join(view.get("logs") or [view.get("log") or ""]), view
        # A few more samples: the plain Python writing to a file never becomes a job.
        loop.run_until(lambda: False, 3)
        assert job_of(tracker, other.pid) is None, [v.to_json()["name"] for v in tracker.views()]
        assert other.pid not in {int(p) for p in loop.last_frame.get("candidates", {})}
        assert str(job.pid) in loop.last_frame.get("candidates", {})
        print(f"torch job found {found_after:.1f}s after launch")
    finally:
        loop.close()


@needs_torch
@pytest.mark.torch
@pytest.mark.timeout(420)
def test_a_short_first_torch_compile_is_compiling_in_three_of_three_runs(tmp_path, started):
    """1 Hz sampling as in the field; each run has a cold inductor cache (a real first compile)."""
    results = []
    for run in range(3):
        run_dir = tmp_path / f"run{run}"
        run_dir.mkdir()
        for f in ("_common.py", "compile.py"):
            shutil.copy(SCENARIOS / f, run_dir / f)
        tracker = JobTracker(JobSettings(stall_after_s=30))
        loop = ProbeLoop(tracker, interval=1.0)
        try:
            loop.step()
            job = nohup(run_dir, [sys.executable, str(run_dir / "compile.py"), "--steps", "15", "--step-time", "0.2"],
                        started, env={"TORCHINDUCTOR_CACHE_DIR": str(run_dir / "inductor-cache")})
            phases: list[str] = []
            evidence: set[str] = set()

            def each():
                v = job_of(tracker, job.pid)
                if v is not None:
                    j = v.to_json()
                    if not phases or phases[-1] != j["phase"]:
                        phases.append(j["phase"])
                    evidence.update(j["evidence"])

            loop.run_until(lambda: bool(phases) and phases[-1] in ("finished", "crashed"), 120, each)
        finally:
            loop.close()
        results.append(phases)
        print(f"run {run}: {phases}; compiler evidence: {sorted(e for e in evidence if 'compiler' in e)}")
    assert all("compiling" in p for p in results), results
    assert all(p[-1] == "finished" and "stalled" not in p for p in results), results

"""What the GPU scripts that watch several real jobs share: whether torch has CUDA here, a config that
watches this machine's jobs by their script names, starting a job as people do and stopping it by its pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

PY = sys.executable


def has_cuda() -> tuple[bool, str]:
    try:
        out = subprocess.run([PY, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"torch check failed: {exc}"
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return False, "torch not importable" + (": " + lines[-1] if lines else "")
    return out.stdout.split()[-1] == "True", out.stdout.strip()


def write_config(out: Path, names, settings: list[str]) -> Path:
    """OUT/gpuwatch.toml: this machine (local transport) and one [[jobs]] entry per NAME_train.py."""
    lines = [*settings, "[[hosts]]", 'name = "local"', "local = true", ""]
    for name in names:
        lines += ["[[jobs]]", f'name = "{name}"', 'host = "local"', f'match = "{name}_train\\\\.py"',
                  f'logs = ["{out / "jobs" / name / "train.log"}"]', ""]
    path = out / "gpuwatch.toml"
    path.write_text("\n".join(lines))
    return path


def start_job(name: str, source: str, out: Path, env: dict) -> subprocess.Popen:
    """OUT/jobs/NAME/NAME_train.py holding `source`, started as people start them: `nohup python
    train.py > train.log 2>&1 &` (no -u; whether stdout is buffered is up to `env`)."""
    run = out / "jobs" / name
    run.mkdir(parents=True, exist_ok=True)
    script = run / f"{name}_train.py"
    script.write_text(source)
    log = open(run / "train.log", "wb")
    p = subprocess.Popen([PY, str(script)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=env, cwd=str(run), start_new_session=True)
    log.close()
    return p


def stop(p: subprocess.Popen | None) -> None:
    """SIGKILL to a job this script started, by its pid only."""
    if p is None or p.poll() is not None:
        return
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass

"""Shared helpers for the capture_*.py scripts: run a real program the way `nohup python x.py > log 2>&1`
would, keeping every byte it writes (carriage returns included) in tests/data/logs/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LOGS = Path(__file__).resolve().parent.parent / "tests" / "data" / "logs"


def run_to_log(argv: list[str], log_name: str, env: dict[str, str] | None = None, cwd: str | None = None,
               timeout: float = 600, keep_empty: bool = True, logs_dir: Path | None = None) -> int:
    """Run argv with stdout and stderr both appended to one file, as a shell redirect does."""
    logs = Path(os.environ.get("CAPTURE_LOGS_DIR", "")) if os.environ.get("CAPTURE_LOGS_DIR") else LOGS
    logs = logs_dir or logs
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / log_name
    full_env = dict(os.environ)
    full_env.pop("PYTHONUNBUFFERED", None)
    full_env.update(env or {})
    with open(path, "wb") as out:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              env=full_env, cwd=cwd, timeout=timeout)
    size = path.stat().st_size
    if not keep_empty and size == 0:
        path.unlink()
    print(f"{log_name}: exit {proc.returncode}, {size} bytes", file=sys.stderr)
    return proc.returncode


def version_of(dist: str) -> str:
    from importlib.metadata import version
    return version(dist)

"""A real service a test needs (sshd, Prometheus, Slurm) that this machine lacks: skipped with the reason
on a developer's machine, but a failure where GPUWATCH_REQUIRE_SERVICES=1 (scripts/test.sh sets it after
installing them all), so CI can never pass by skipping the real parts."""

from __future__ import annotations

import os

import pytest


def service_missing(what: str, reason: str) -> None:
    if os.environ.get("GPUWATCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"this run needs a real {what}: {reason}", pytrace=False)
    pytest.skip(reason)

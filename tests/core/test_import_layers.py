"""Architecture rules: only gpuwatch_tui.ui imports textual, so the core runs without it; only
gpuwatch_tui.transport imports asyncssh, so SSH details (its errors, its connection's internals) stay there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui"


def imports_of(path: Path, top: str) -> list[str]:
    """Where `path` imports the package `top` or a module of it (absolute imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{path}:{node.lineno}: {name}" for name in names if name.split(".")[0] == top]
    return found


@pytest.mark.parametrize("top, home", [("textual", "ui"), ("asyncssh", "transport")])
def test_only_its_package_imports_a_library(top, home):
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / home in path.parents:
            continue
        offenders += imports_of(path, top)
    assert offenders == [], f"{top} imported outside gpuwatch_tui.{home}:\n" + "\n".join(offenders)


def test_the_check_sees_an_import(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import os\nfrom textual.app import App\n\ndef f():\n    import asyncssh.config\n")
    assert len(imports_of(sample, "textual")) == 1 and len(imports_of(sample, "asyncssh")) == 1

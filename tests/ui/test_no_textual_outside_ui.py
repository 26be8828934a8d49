"""Architecture rule: only gpuwatch_tui.ui imports textual, so the core runs without it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui"


def textual_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{path}:{node.lineno}: {name}" for name in names if name.split(".")[0] == "textual"]
    return found


def test_only_ui_imports_textual():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / "ui" in path.parents:
            continue
        offenders += textual_imports(path)
    assert offenders == [], "textual imported outside gpuwatch_tui.ui:\n" + "\n".join(offenders)


def test_the_check_sees_an_import(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import os\nfrom textual.app import App\n")
    assert len(textual_imports(sample)) == 1

"""Architecture rules, declared as import-linter contracts in pyproject.toml ([tool.importlinter]): the
layers top to bottom (and inside ui/: app, screens, widgets), no circles inside any package, only ui/
imports textual and rich and only the CLI imports ui/, only transport/ imports asyncssh, and the probe
(shipped to hosts) imports nothing of ours. The one rule import-linter cannot say, "the probe imports
only the standard library", is checked here over the same graph (grimp's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "gpuwatch_tui"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's CLI over the tree at `root`, with that tree's src/ first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())", "--no-cache", "--no-logo"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_import_contracts_hold():
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout and " kept" in run.stdout


def test_the_contracts_catch_what_they_forbid(tmp_path):
    """A copy of the tree with one import of each forbidden kind (some inside a function, where they
    hide): each contract says it is broken, naming the import."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "src" / PACKAGE, tmp_path / "src" / PACKAGE,
                    ignore=shutil.ignore_patterns("__pycache__", "*.gz"))
    src = tmp_path / "src" / PACKAGE
    additions = {
        "jobs/line_ring.py": "\n\ndef _ui():\n    from ..ui.formatting import fmt_age\n    return fmt_age\n",
        "store.py": "\n\ndef _textual():\n    from textual.app import App\n    return App\n",
        "feeds/layered.py": "\n\ndef _ssh():\n    import asyncssh.config\n    return asyncssh.config\n",
        "transport/failure.py": "\nfrom ..monitor import Monitor  # noqa: E402,F401\n",
        "actions/registry.py": "\n\ndef _circle():\n    from .service import ActionService\n    return ActionService\n",
        "probe/ops_base.py": "\n\ndef _ours():\n    from gpuwatch_tui import vocab\n    return vocab\n",
        "ui/widgets/line_list.py": "\n\ndef _up():\n    from ..screens import dashboard\n    return dashboard\n",
    }
    for path, text in additions.items():
        with open(src / path, "a", encoding="utf-8") as f:
            f.write(text)
    run = lint_imports(tmp_path)
    assert run.returncode != 0
    report = run.stdout
    for contract in ("The layers, top to bottom", "Inside the dashboard", "No circles among",
                     "Only the CLI and its verbs import the dashboard", "Only gpuwatch_tui.ui imports textual and rich",
                     "Only gpuwatch_tui.transport imports asyncssh", "gpuwatch_tui.probe imports nothing else"):
        line = next((ln for ln in report.splitlines() if ln.startswith(contract)), "")
        assert "BROKEN" in line or "BROKEN" in report.split(contract, 1)[1].split("\n", 2)[1], (contract, report)
    for expected in ("gpuwatch_tui.store -> textual", "gpuwatch_tui.feeds.layered -> asyncssh",
                     "gpuwatch_tui.transport.failure -> gpuwatch_tui.monitor",
                     "gpuwatch_tui.jobs.line_ring -> gpuwatch_tui.ui",
                     "gpuwatch_tui.ui.widgets.line_list -> gpuwatch_tui.ui.screens.dashboard"):
        assert expected in report, (expected, report)


def probe_imports() -> list[tuple[str, str, int]]:
    """(probe module, imported module, line) for every import by a shipped probe module of a module
    outside the probe: its siblings are imported by bare name on the host (`from ops_base import`)."""
    graph = grimp.build_graph(PACKAGE, include_external_packages=True, cache_dir=None)
    probe = f"{PACKAGE}.probe"
    siblings = {m.rsplit(".", 1)[1] for m in graph.find_children(probe)}
    found = []
    for module in sorted(graph.find_descendants(probe) | {probe}):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported.startswith(probe + ".") or imported in siblings:
                continue
            for detail in graph.get_import_details(importer=module, imported=imported):
                found.append((module, imported, detail["line_number"]))
    return found


def test_the_probe_imports_only_the_standard_library_and_its_siblings():
    found = probe_imports()
    assert len(found) >= 20  # the check sees the probe's imports (it cannot pass by finding none)
    outside = [f for f in found if f[1].split(".")[0] not in sys.stdlib_module_names]
    assert outside == [], "the probe imports more than the standard library and its siblings:\n" + "\n".join(
        f"{m}:{line} -> {imported}" for m, imported, line in outside)

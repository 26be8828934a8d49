"""The engine writes its phases, and the host feeds their states, as literals where they decide them
(`Decision("stalled", ...)`, `self._set("connected")`): each must be a word of the vocabulary (vocab.py),
so a phase or a state cannot be spelled a second way."""

from __future__ import annotations

import ast
from pathlib import Path

from gpuwatch_tui.vocab import HOST_STATES, PHASES

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui"


def first_literals(paths, callee_names, arg_index=0) -> list[tuple[str, int, str]]:
    """(file, line, value) of each str constant passed as positional argument `arg_index` to a call of a
    function or method named in `callee_names`."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or len(node.args) <= arg_index:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            arg = node.args[arg_index]
            if name in callee_names and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((path.name, node.lineno, arg.value))
    return found


def test_every_phase_the_engine_writes_is_a_vocabulary_phase():
    found = first_literals(sorted((PACKAGE / "jobs").glob("*.py")), {"Decision", "Verdict"})
    assert len(found) >= 20  # the engine's verdicts are found (the check cannot pass by finding none)
    assert [f for f in found if f[2] not in PHASES] == []


def test_every_host_state_a_feed_sets_is_a_vocabulary_state():
    paths = sorted((PACKAGE / "feeds").glob("*.py"))
    found = first_literals(paths, {"_set"}) + first_literals(paths, {"host_state"}, 1)
    assert len(found) >= 8
    assert [f for f in found if f[2] not in HOST_STATES] == []


def test_the_check_sees_a_misspelt_phase(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text('Decision("stalld", None)\nself._set("conected")\n')
    assert first_literals([sample], {"Decision"}) == [("m.py", 1, "stalld")]
    assert first_literals([sample], {"_set"}) == [("m.py", 2, "conected")]

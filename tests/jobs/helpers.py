"""Shared helpers for the job tests: replay captured logs through the real tail + interpreter."""

from __future__ import annotations

from pathlib import Path

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.logtail import LogBuffer
from gpuwatch_tui.jobs.rules import RuleSet

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"


def replay(name: str, chunk: int = 4096, rules: RuleSet | None = None):
    """Feed a captured log in chunks (as the probe would). Returns (buffer, interpreter, hints)."""
    data = (LOGS / name).read_bytes()
    buf = LogBuffer(max_lines=5000)
    interp = LogInterpreter(rules or RuleSet.with_user_rules())
    hints: list[str] = []
    t = 1000.0
    for i in range(0, len(data), chunk):
        t += 1.0
        buf.feed_bytes(data[i : i + chunk], t)
        for line in buf.take_new():
            interp.feed_line(line.text, t)
            if interp.hint and (not hints or hints[-1] != interp.hint.phase):
                hints.append(interp.hint.phase)
        if buf.live:
            interp.feed_live(buf.live, t)
            if interp.hint and (not hints or hints[-1] != interp.hint.phase):
                hints.append(interp.hint.phase)
    return buf, interp, hints


def find_log(prefix: str) -> str:
    matches = sorted(p.name for p in LOGS.glob(prefix + "*.log"))
    assert matches, f"no captured log {prefix}*"
    return matches[-1]

"""Every field a host controls, filled with generated hostile text, drawn by the real dashboard: nothing raw.

The recorded fleet (tests/ui/data/fleet.json) has each host-controlled string (job, process and GPU names,
argv, cwd, users, host errors and hints, evidence, advice, log lines and paths, output-dir names, units)
extended with hypothesis-drawn hostile text. The app draws the dashboard, the GPU-process view (g), each
job's pane and the kill dialog for a plan carrying the same text; every strip the compositor would send to
the terminal is checked: no C0/C1 control, DEL, bidi or zero-width character, no run of combining marks
beyond the sanitiser's bound.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuwatch_tui.safe_text import MAX_MARKS  # noqa: E402
from gpuwatch_tui.ui.app import GpuwatchApp  # noqa: E402
from gpuwatch_tui.ui.recorded_source import RecordedSource  # noqa: E402
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen  # noqa: E402

from .hostile_strings import PAYLOADS, assert_clean, hostile_text  # noqa: E402

FLEET = Path(__file__).resolve().parents[1] / "ui" / "data" / "fleet.json"
# Written on the host: every string under these keys (a host's own `name` is the config's, and ids,
# phases, states, kinds and keys are the core's vocabulary, not text a host wrote).
HOSTILE_KEYS = {"advice", "cmdline", "cwd", "driver", "error", "evidence", "hint", "lines", "log", "name",
                "newest_name", "path", "user", "unit"}


def poison(data, words):
    """The fleet with each host-controlled string extended by the next hostile word."""
    def walk(node, key=None, parent=None):
        if isinstance(node, dict):
            is_host = parent == "hosts"
            return {k: (v if (is_host and k == "name") else walk(v, k, key)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, key, parent if key is None else key) for v in node]
        if isinstance(node, str) and key in HOSTILE_KEYS:
            return node + next(words)
        return node
    return walk(data)


def check_screen(app) -> int:
    strips = app.screen._compositor.render_strips()
    for strip in strips:
        assert_clean(strip.text, MAX_MARKS)
    return len(strips)


async def draw_everything(path: Path, word: str) -> None:
    app = GpuwatchApp(RecordedSource(path), min_refresh_interval=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        assert check_screen(app)
        await pilot.press("g")
        await pilot.pause()
        check_screen(app)
        await pilot.press("g")
        for job in app.source.jobs()[:3]:
            app.open_job(job.id)
            await pilot.pause()
            check_screen(app)
            app.pop_screen()
            await pilot.pause()
        target = SimpleNamespace(pid=4242, user=f"ml{word}", role=f"main{word}", cmdline=("python3", f"t{word}.py", word))
        plan = SimpleNamespace(action="kill", title="Kill", host="trainer-a", job_id="trainer-a:1", job=f"job{word}",
                               label=f"k3xqa job{word}", short_id="k3xqa",
                               targets=(target,), command=f"SIGTERM to 4242 {word}", warnings=(f"careful {word}",),
                               confirm=True, slurm_cancel=None)
        app.push_screen(ConfirmActionScreen(plan))
        await pilot.pause()
        check_screen(app)
        app.notify(f"refused: {word}", title=f"job{word}")
        await pilot.pause()
        check_screen(app)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(hostile_text.filter(bool), min_size=1, max_size=6))
def test_hostile_text_in_every_field_is_drawn_safely(tmp_path_factory, words):
    path = tmp_path_factory.mktemp("fleet") / "fleet.json"
    cycle = itertools.cycle(words + PAYLOADS)
    path.write_text(json.dumps(poison(json.loads(FLEET.read_text()), cycle)), encoding="utf-8")
    asyncio.run(draw_everything(path, "".join(PAYLOADS[:6])))

"""Render the README screenshots with Textual itself, from the recorded fleet (tests/ui/data/fleet.json).

    python scripts/screenshot.py --all                     # every view below into docs/
    python scripts/screenshot.py --view job [--job trainer-e:51877] [--size 160x45] [-o out.svg]

Views: dashboard, job (a job pane), processes (the GPU process view, `g`), confirm (the kill dialog,
`k`), stacks (the py-spy stack view of a real 2-rank NCCL hang). A recording cannot act on hosts, so
the dialog is planned by the UI tests' acting source and the stacks are the tests' real dumps.
Times are shown in UTC so the files do not change with the machine they are made on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # the tests' recorded fixtures

from gpuwatch_tui.ui.app import GpuwatchApp  # noqa: E402
from gpuwatch_tui.ui.recorded_source import RecordedSource  # noqa: E402

FLEET = ROOT / "tests" / "ui" / "data" / "fleet.json"
DOCS = ROOT / "docs"
DPO = "trainer-b:30100"  # dpo-2rank: two ranks, one NCCL collective hung
# view -> (file in docs/, size, job to open)
VIEWS = {
    "dashboard": ("screenshot.svg", "160x45", None),
    "job": ("screenshot-job.svg", "160x45", DPO),
    "processes": ("screenshot-processes.svg", "160x45", None),
    "confirm": ("screenshot-confirm.svg", "120x40", None),
    "stacks": ("screenshot-stacks.svg", "120x40", None),
}


def make_app(view: str, theme: str) -> GpuwatchApp:
    if view == "confirm":
        from tests.ui.actions_fakes import ActingRecordedSource

        return GpuwatchApp(ActingRecordedSource(FLEET), theme=theme)
    return GpuwatchApp(RecordedSource(FLEET), theme=theme)


async def render(view: str, size: str, job: str | None, theme: str, out: Path) -> Path:
    width, height = (int(n) for n in size.split("x"))
    app = make_app(view, theme)
    async with app.run_test(size=(width, height)) as pilot:
        await pilot.pause()
        if job:
            app.open_job(job)
            await pilot.pause()
        if view == "processes":
            await pilot.press("g")
        elif view == "confirm":
            await pilot.press("down", "k")  # the jobs table's second row: dpo-2rank
        elif view == "stacks":
            from gpuwatch_tui.ui.screens.stack_view import StackViewScreen
            from tests.ui.stack_fixtures import nccl_hang_report

            app.push_screen(StackViewScreen(nccl_hang_report()))
        await pilot.pause()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every view, into docs/")
    parser.add_argument("--view", choices=sorted(VIEWS), default="dashboard")
    parser.add_argument("--theme", default="gpuwatch-dark")
    parser.add_argument("--size", default=None, help="WIDTHxHEIGHT (default: the view's)")
    parser.add_argument("--job", default=None, help="open this job's pane first (default: the view's)")
    parser.add_argument("-o", "--output", default=None, help="the SVG to write (default: the view's file in docs/)")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    time.tzset()
    views = list(VIEWS) if args.all else [args.view]
    for view in views:
        name, size, job = VIEWS[view]
        out = Path(args.output).resolve() if args.output and not args.all else DOCS / name
        asyncio.run(render(view, args.size or size, args.job or job, args.theme, out))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

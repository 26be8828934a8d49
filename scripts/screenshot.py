"""Render the README screenshot (docs/screenshot.svg) with Textual itself, from the recorded fleet.

    python scripts/screenshot.py [--theme gpuwatch-dark] [--size 160x45] [--job trainer-b:30100] [-o docs/screenshot.svg]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.ui.app import GpuwatchApp  # noqa: E402
from gpuwatch_tui.ui.recorded_source import RecordedSource  # noqa: E402

FLEET = ROOT / "tests" / "ui" / "data" / "fleet.json"


async def render(args: argparse.Namespace) -> Path:
    width, height = (int(n) for n in args.size.split("x"))
    app = GpuwatchApp(RecordedSource(FLEET), theme=args.theme)
    out = Path(args.output).resolve()
    async with app.run_test(size=(width, height)) as pilot:
        await pilot.pause()
        if args.job:
            app.open_job(args.job)
            await pilot.pause()
            await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--theme", default="gpuwatch-dark")
    parser.add_argument("--size", default="160x45")
    parser.add_argument("--job", default=None, help="open this job's pane first")
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "screenshot.svg"))
    out = asyncio.run(render(parser.parse_args()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`gpuwatch [ARGS]` that exits the moment its first frame is painted: for counting what start-up
costs (bench_ui_startup.py --instructions runs it under callgrind). With `--floor` it runs the
minimal Textual app of startup_floor_app.py the same way instead.

The first paint is where the app starts its source (GpuwatchApp._start_source runs after the first
refresh), so everything before it is start-up and nothing after it is counted."""

from __future__ import annotations

import os
import sys


def first_paint_exit() -> None:
    sys.stdout.flush()
    os._exit(0)  # no teardown: only start-up is counted


def run_gpuwatch(argv: list[str]) -> int:
    from gpuwatch_tui import cli
    from gpuwatch_tui.ui.app import GpuwatchApp

    GpuwatchApp._start_source = lambda self: first_paint_exit()
    return cli.main(argv)


def run_floor() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from startup_floor_app import FloorApp

    class ExitAtFirstPaint(FloorApp):
        def on_mount(self) -> None:
            self.call_after_refresh(first_paint_exit)

    ExitAtFirstPaint().run()
    return 0


if __name__ == "__main__":
    sys.exit(run_floor() if sys.argv[1:] == ["--floor"] else run_gpuwatch(sys.argv[1:]))

"""Enter (open the job pane) and escape (back to the dashboard) at 128 hosts x 8 GPUs, in process.

The dashboard runs over the synthetic fleet of bench_ui_harness (128 hosts, each reporting once a
second, full sparklines, one job per host) at 200x50; each key is timed with the faults bench's
clock: from the key handed to the app to the first frame showing its effect, every frame turned
into terminal bytes. No probe processes share the cores (bench_ui_live_fleet.py --job-pane has
those, and their load swamps the figure), so this is the dashboard's own cost.
    python benchmarks/bench_job_pane_keys.py [--presses 20] [--runs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench_ui_harness import SyntheticFleet  # noqa: E402
from tests.faults.dashboard_faults import FrameClock, percentile  # noqa: E402

from gpuwatch_tui.ui.app import GpuwatchApp  # noqa: E402
from gpuwatch_tui.ui.screens.dashboard import DashboardScreen  # noqa: E402
from gpuwatch_tui.ui.screens.job_screen import JobScreen  # noqa: E402

SIZE = (200, 50)


async def one_run(presses: int) -> dict:
    source = SyntheticFleet(hosts=128, gpus=8)
    app = GpuwatchApp(source)
    times: dict[str, list[float]] = {"enter": [], "escape": []}
    load = os.getloadavg()[0]
    async with app.run_test(size=SIZE):
        clock = FrameClock(app)
        await asyncio.sleep(6.0)  # the history filled and every host reporting
        for _ in range(presses):
            times["enter"].append(await clock.press("enter", lambda: isinstance(app.screen, JobScreen)))
            await asyncio.sleep(0.3)
            times["escape"].append(await clock.press("escape", lambda: isinstance(app.screen, DashboardScreen)))
            await asyncio.sleep(0.3)
        await source.stop()
    out = {key: {"p50_ms": round(1000 * percentile(v, 0.5), 1), "p95_ms": round(1000 * percentile(v, 0.95), 1),
                 "max_ms": round(1000 * max(v), 1), "first_ms": round(1000 * v[0], 1)} for key, v in times.items()}
    out["load1"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=20, help="enter/escape pairs per run")
    parser.add_argument("--runs", type=int, default=3, help="runs; figures are medians over them")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        run = asyncio.run(one_run(args.presses))
        runs.append(run)
        print(f"run {n + 1}: " + "  ".join(f"{k} p50 {run[k]['p50_ms']} p95 {run[k]['p95_ms']} ms"
                                           for k in ("enter", "escape")) + f"  load {run['load1']}", flush=True)
    median = {key: {fig: round(statistics.median(r[key][fig] for r in runs), 1) for fig in runs[0][key]}
              for key in ("enter", "escape")}
    print("medians: " + "  ".join(f"{k} p50 {v['p50_ms']} p95 {v['p95_ms']} ms" for k, v in median.items()))
    if args.out:
        Path(args.out).write_text(json.dumps({"hosts": 128, "gpus_per_host": 8, "size": SIZE, "presses": args.presses,
                                              "cpus": os.cpu_count(), "median": median, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Before and after, side by side: the dashboard of another checkout (--base), this checkout's and
`nvitop --interval 1` run at the same time, each under its own pty at the same size, so the three see the same
machine in the same minute (a shared, noisy machine makes runs minutes apart incomparable).

Each gets its own local host on the nvidia-smi stand-in with one "training" process (bench_dash_pty's setup;
nvitop reads the NVML stand-in), and each is measured as bench_dash_pty measures: CPU of the program and of
its process tree, bytes written to the terminal, RSS, key->frame for `g`, over --seconds after --settle.

    git worktree add /tmp/gpuwatch-base main     # or: git archive main | tar -x -C /tmp/gpuwatch-base
    python benchmarks/bench_dash_ab.py --base /tmp/gpuwatch-base --sizes 80x24,200x50,300x80 --reps 3 \\
        --out benchmarks/results/dash-pty-ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path

import bench_dash_pty as pty_bench

ROOT = Path(__file__).resolve().parents[1]


def environment(tree: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env.update(TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(tree / "src"), HOME=str(home))
    for key, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                     ("XDG_STATE_HOME", ".local/state")):
        env[key] = str(home / sub)
    return env


def one_round(base: Path, cols: int, rows: int, seconds: float, keys: int) -> dict[str, dict]:
    sys.path.insert(0, str(ROOT))
    from tests.support.fake_nvml import build_fake_nvml, fake_nvml_env

    with tempfile.TemporaryDirectory(prefix="gpuwatch-ab-") as tmp:
        tmp_path, procs, runs = Path(tmp), [], {}
        try:
            for name, tree in (("before", base), ("after", ROOT)):
                where = tmp_path / name
                where.mkdir()
                config, started = pty_bench.write_hosts(where, 1, 1)
                procs += started
                runs[name] = ([sys.executable, "-m", "gpuwatch_tui.cli", "--config", str(config)],
                              environment(tree, where / "home"), pty_bench.GPUWATCH_READY,
                              (b"g", pty_bench.PROCESS_VIEW), keys)
            nv_env = fake_nvml_env(build_fake_nvml(tmp_path / "nvml"), 1, [procs[0].pid],
                                   environment(ROOT, tmp_path / "nvitop"))
            runs["nvitop"] = ([sys.executable, "-m", "nvitop", "--interval", "1"], nv_env, pty_bench.NVITOP_READY,
                              None, 0)
            results: dict[str, dict] = {}

            def measure(name: str) -> None:
                argv, env, ready, toggle, presses = runs[name]
                results[name] = pty_bench.measure(argv, env, cols, rows, seconds, presses, ready, toggle)

            threads = [threading.Thread(target=measure, args=(name,)) for name in runs]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return results
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="a checkout of the commit to compare with")
    parser.add_argument("--sizes", default="80x24,200x50,300x80")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=65.0, help="after the first frame, before measuring")
    parser.add_argument("--keys", type=int, default=3, help="g presses each way for key->frame")
    parser.add_argument("--out", help="write every run and the medians as JSON here")
    args = parser.parse_args()
    pty_bench.SETTLE_S = args.settle
    runs = []
    for rep in range(args.reps):
        for size in args.sizes.split(","):
            cols, rows = (int(v) for v in size.split("x"))
            for tool, result in one_round(Path(args.base).resolve(), cols, rows, args.seconds, args.keys).items():
                result.pop("screen", None)
                result.update(tool=tool, rep=rep)
                runs.append(result)
                print(json.dumps(result), flush=True)
    medians = {}
    for size in args.sizes.split(","):
        for tool in ("before", "after", "nvitop"):
            mine = [r for r in runs if r.get("size") == size and r["tool"] == tool and "error" not in r]
            if mine:
                medians[f"{size} {tool}"] = {key: statistics.median(r[key] for r in mine) for key in (
                    "cpu_pct_dashboard_only", "cpu_pct_of_core", "bytes_per_min", "rss_mb")}
    print(json.dumps(medians, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"cpus": os.cpu_count(), "base": str(args.base), "runs": runs,
                                              "medians": medians}, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""First frame of the real `gpuwatch` command, from process launch, in a real terminal (tmux).

This is the figure a user sees: the interpreter starting, every import (core and Textual), the
config, the Monitor and the first paint. It launches `python -m gpuwatch_tui.cli --config F`
with F watching this machine (`local = true`), and times spawn -> the host's name and the jobs
header on screen, and spawn -> "connected" (the first sample).

Floors, so a figure can be split into what is ours and what is not: a bare interpreter, `import
textual.app` alone, and the first frame of a minimal Textual app (startup_floor_app.py: one line
of text, no CSS of its own) launched and watched exactly as gpuwatch is.

Also the CPU time the process had used when its first frame was seen (/proc/PID/stat: a figure
that moves much less than wall time on shared cores) and the load average around the runs.

The bench runs its own tmux server (its own socket, no user config) with a session that stays
open, so no launch pays for starting a tmux server and no other tmux user shares it.
`--baseline-src DIR` alternates launches between this tree and another checkout's `src` (for
before/after figures on a noisy machine: both see the same load).

`--instructions` adds the figure that does not move with the load: instructions executed from
launch to the first paint, counted by valgrind's callgrind (startup_first_paint.py exits at the
first paint), for this tree, the baseline, and the floors. Needs valgrind (`--valgrind PATH`).

Target: first frame <= 0.5 s from launch.
    python benchmarks/bench_ui_startup.py [--runs 5] [--tmux PATH] [--baseline-src DIR] [--out FILE]
                                          [--instructions [--valgrind PATH]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_ui_harness import ROOT, child_env, cpu_seconds

TARGETS = {"first_frame_from_launch_s_median": 0.5}
CONFIG = """\
[[hosts]]
name = "bench-local"
local = true
"""
FLOOR_APP = Path(__file__).resolve().parent / "startup_floor_app.py"
FIRST_PAINT = Path(__file__).resolve().parent / "startup_first_paint.py"
WIDTH, HEIGHT = 120, 36


class Tmux:
    """A tmux server of the bench's own: `path` is the tmux program (it need not be on PATH)."""

    def __init__(self, path: str) -> None:
        self.path = path
        # The socket in a folder of our own: removed with it (tmux leaves a killed server's socket behind).
        self._folder = tempfile.TemporaryDirectory(prefix="gpuwatch-bench-tmux-")
        self.socket = os.path.join(self._folder.name, "socket")
        # One session stays open for the whole bench, so the server is up before any launch.
        # Programs by absolute path: the server runs them with the PATH it was given (maybe without /usr/bin).
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "keeper", "-x", str(WIDTH), "-y", str(HEIGHT),
                 sys.executable, "-c", "import time; time.sleep(86400)")

    def run(self, *args: str) -> str:
        return subprocess.run([self.path, "-S", self.socket, *args], check=True, capture_output=True,
                              text=True).stdout

    def capture(self, session: str) -> str:
        try:
            return self.run("capture-pane", "-p", "-t", session)
        except subprocess.CalledProcessError:
            raise SystemExit(f"bench_ui_startup: the program in tmux session {session} ended before its "
                             "first frame") from None

    def kill_session(self, session: str) -> None:
        subprocess.run([self.path, "-S", self.socket, "kill-session", "-t", session], capture_output=True)

    def close(self) -> None:
        subprocess.run([self.path, "-S", self.socket, "kill-server"], capture_output=True)
        self._folder.cleanup()


def find_program(name: str, given: str | None) -> str:
    path = given or shutil.which(name)
    if path is None:
        raise SystemExit(f"bench_ui_startup: {name} not found on PATH; pass --{name} PATH")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit(f"bench_ui_startup: --{name} {path!r} is not an executable file")
    return path


def absolute_env(args: list[str]) -> list[str]:
    """child_env()'s `env ...` with env by its full path (see Tmux.__init__)."""
    return [shutil.which("env") or "/usr/bin/env", *args[1:]]


def launch_once(tmux: Tmux, command: list[str], src: Path, ready: tuple[str, ...],
                connected_word: str | None) -> tuple[float, float, float]:
    """Spawn `command` in a new tmux window; seconds until every `ready` string is on screen, until
    `connected_word` is (nan when None or never), and the CPU seconds used at the first frame."""
    session = f"start-{time.monotonic_ns()}"
    env = absolute_env(child_env({"PYTHONPATH": str(src), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", ""),
                                  "HOME": os.environ.get("HOME", "/root")}))
    start = time.monotonic()
    tmux.run("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), *env, *command)
    first = connected = first_cpu = None
    pid = int(tmux.run("display", "-p", "-t", session, "#{pane_pid}").strip())  # env execs python: same pid
    try:
        while time.monotonic() - start < 30:
            screen = tmux.capture(session)
            now = time.monotonic() - start
            if first is None and all(word in screen for word in ready):
                first = now
                try:
                    first_cpu = cpu_seconds(pid)
                except (OSError, ValueError, IndexError):
                    first_cpu = float("nan")
                if connected_word is None:
                    break
            if first is not None and connected_word is not None and connected_word in screen:
                connected = now
                break
            time.sleep(0.005)
        tmux.run("send-keys", "-t", session, "q")
        time.sleep(0.3)
    finally:
        tmux.kill_session(session)
    if first is None:
        raise SystemExit(f"{' '.join(command)}: the first frame did not come up")
    return first, connected if connected is not None else float("nan"), first_cpu


def launch_gpuwatch(tmux: Tmux, config: Path, src: Path) -> tuple[float, float, float]:
    return launch_once(tmux, [sys.executable, "-m", "gpuwatch_tui.cli", "--config", str(config)], src,
                       ("bench-local", "Host"), "connected")


def launch_floor_app(tmux: Tmux) -> tuple[float, float, float]:
    return launch_once(tmux, [sys.executable, str(FLOOR_APP)], ROOT / "src", ("bench-local", "Host"), None)


def instructions(tmux: Tmux, valgrind: str, args: list[str], src: Path, terminal: bool = True) -> int:
    """Instructions the interpreter executes for `python ARGS` (callgrind's total), in a tmux
    window when it paints (it must see a real terminal) or as a plain child process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no",
                   sys.executable, *args]
        if terminal:
            session = f"count-{time.monotonic_ns()}"
            env = absolute_env(child_env({"PYTHONPATH": str(src), "TERM": "xterm-256color",
                                          "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}))
            tmux.run("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), *env, *command)
            try:
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline and "\nsummary:" not in (out.read_text() if out.exists() else ""):
                    time.sleep(0.5)
            finally:
                tmux.kill_session(session)
        else:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            subprocess.run(command, check=True, capture_output=True, env={**env, "PYTHONPATH": str(src)})
        for line in out.read_text().splitlines() if out.exists() else ():
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise SystemExit(f"bench_ui_startup: callgrind gave no count for {' '.join(args)}")


def count_instructions(tmux: Tmux, valgrind: str, trees: dict[str, Path], config: Path) -> dict:
    gpuwatch = [str(FIRST_PAINT), "--config", str(config)]
    counts = {f"{name}_first_paint": instructions(tmux, valgrind, gpuwatch, src) for name, src in trees.items()}
    counts["floor_minimal_textual_app_first_paint"] = instructions(tmux, valgrind, [str(FIRST_PAINT), "--floor"],
                                                                   trees["this"])
    counts["floor_import_textual_app"] = instructions(tmux, valgrind, ["-c", "import textual.app"], trees["this"],
                                                      terminal=False)
    counts["floor_bare_python"] = instructions(tmux, valgrind, ["-c", "pass"], trees["this"], terminal=False)
    counts["this_import_cli_and_ui"] = instructions(
        tmux, valgrind, ["-c", "import gpuwatch_tui.cli, gpuwatch_tui.ui.run"], trees["this"], terminal=False)
    return {"instructions_to_first_paint_M": {k: round(v / 1e6, 1) for k, v in counts.items()}}


def wall(args: list[str], src: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.monotonic()
    subprocess.run([sys.executable, *args], check=True, env={**env, "PYTHONPATH": str(src)})
    return time.monotonic() - start


def summary(runs: list[tuple[float, float, float]], src: Path) -> dict:
    firsts = [r[0] for r in runs]
    return {
        "first_frame_from_launch_s_median": round(statistics.median(firsts), 3),
        "first_frame_from_launch_s_min": round(min(firsts), 3),
        "first_frame_from_launch_s_all": [round(v, 3) for v in firsts],
        "first_frame_cpu_s_median": round(statistics.median(r[2] for r in runs), 3),
        "first_frame_cpu_s_all": [round(r[2], 3) for r in runs],
        "connected_from_launch_s_median": round(statistics.median(r[1] for r in runs), 3),
        "import_cli_and_ui_s": round(min(wall(["-c", "import gpuwatch_tui.cli, gpuwatch_tui.ui.run"], src)
                                         for _ in range(3)), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="launches per tree (after one warm-up each)")
    parser.add_argument("--tmux", metavar="PATH", help="the tmux program (default: tmux on PATH)")
    parser.add_argument("--baseline-src", metavar="DIR", type=Path,
                        help="another checkout's src folder: launches alternate between it and this tree")
    parser.add_argument("--out", metavar="FILE", type=Path, help="also write the JSON result here")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions to the first paint under callgrind (slow: ~20 s a count)")
    parser.add_argument("--valgrind", metavar="PATH", help="the valgrind program (default: valgrind on PATH)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: expected at least 1")
    if args.baseline_src is not None and not (args.baseline_src / "gpuwatch_tui" / "cli.py").is_file():
        parser.error(f"--baseline-src {args.baseline_src}: no gpuwatch_tui/cli.py there")
    if args.baseline_src is not None and not (args.baseline_src / "gpuwatch_tui" / "themes").is_dir():
        # A copy of src alone breaks the package's themes link: that start would differ (and cost more).
        parser.error(f"--baseline-src {args.baseline_src}: gpuwatch_tui/themes is missing (copy the checkout's "
                     "themes/ folder beside src/)")
    trees = {"this": ROOT / "src"}
    if args.baseline_src is not None:
        trees["baseline"] = args.baseline_src.resolve()
    valgrind = find_program("valgrind", args.valgrind) if args.instructions else None
    tmux = Tmux(find_program("tmux", args.tmux))
    counts = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "hosts.toml"
            config.write_text(CONFIG)
            load_before = os.getloadavg()[0]
            for src in trees.values():
                launch_gpuwatch(tmux, config, src)  # warm the page cache and .pyc files; not counted
            launch_floor_app(tmux)
            runs: dict[str, list] = {name: [] for name in trees}
            floor_runs = []
            for _ in range(args.runs):  # alternated, so every tree sees the same load
                for name, src in trees.items():
                    runs[name].append(launch_gpuwatch(tmux, config, src))
                floor_runs.append(launch_floor_app(tmux))
            load_after = os.getloadavg()[0]
            if valgrind is not None:
                counts = count_instructions(tmux, valgrind, trees, config)
    finally:
        tmux.close()
    result = summary(runs["this"], trees["this"])
    floor_firsts = [r[0] for r in floor_runs]
    result.update({
        "load1_before": round(load_before, 2), "load1_after": round(load_after, 2), "cpus": os.cpu_count(),
        "floor_bare_python_s": round(min(wall(["-c", "pass"], trees["this"]) for _ in range(3)), 3),
        "floor_import_textual_app_s": round(min(wall(["-c", "import textual.app"], trees["this"])
                                                for _ in range(3)), 3),
        "floor_minimal_textual_app_first_frame_s_median": round(statistics.median(floor_firsts), 3),
        "floor_minimal_textual_app_first_frame_s_min": round(min(floor_firsts), 3),
        "floor_minimal_textual_app_cpu_s_median": round(statistics.median(r[2] for r in floor_runs), 3),
    })
    result.update(counts)
    if "baseline" in runs:
        result["baseline"] = {"src": str(trees["baseline"]), **summary(runs["baseline"], trees["baseline"])}
    result["targets"] = TARGETS
    result["met"] = {k: result[k] <= v for k, v in TARGETS.items()}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

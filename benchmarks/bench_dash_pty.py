"""What the dashboard costs through a REAL terminal: bytes written to a pty, CPU of the whole process tree
(the dashboard and the probes it starts), RSS, first frame and key->frame latency, at several sizes.

Each run starts the program under `pty.fork()` at the given size, reads everything it writes (a pyte screen
follows the bytes so the first frame and a key's effect can be seen), then:
  - first frame: from exec until the screen shows the dashboard's footer (nvitop: its process header);
  - steady state: CPU (user+system of the process and every descendant), bytes read from the pty, RSS,
    over --seconds after the first frame has settled, scaled to a minute;
  - key->frame: `g` (the GPU process view) and `g` again, --keys times each, until the screen shows the
    change (the process view's header appears / goes), p50 and p95.

Hosts (say which in the report):
  --hosts N --gpus M   N local hosts (the probe as a local process, no sshd), each reading M GPUs from the
                       nvidia-smi stand-in replaying H200 recordings, one "training" process per host
  --this-machine       no config at all: the dashboard watches this machine (a GPU host's real GPUs)
With --nvitop, `nvitop --interval 1` is measured the same way (on this machine's NVML; with --fake-nvml the
NVML stand-in from tests/support is put on LD_LIBRARY_PATH for it); with --together both run in the same
minute, each under its own pty, so a busy machine weighs on both alike; with --sizes-together every size
of both runs at once (on a machine with cores to spare). --reps repeats every size.

    python benchmarks/bench_dash_pty.py --hosts 1 --gpus 1 --sizes 80x24,200x50,300x80 --seconds 60
    python benchmarks/bench_dash_pty.py --hosts 16 --gpus 8 --sizes 200x50
    python benchmarks/bench_dash_pty.py --this-machine --nvitop --seconds 60      # on a GPU host
    python benchmarks/bench_dash_pty.py --this-machine --nvitop --together --reps 2 --settle 65 --seconds 30
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil
import pyte

ROOT = Path(__file__).resolve().parents[1]
GPUWATCH_READY = re.compile(r"\bquit\b", re.I)  # the footer names the quit key once the screen is up
PROCESS_VIEW = re.compile(r"Host\s+GPU\s+PID")  # the GPU process view's header
SETTLE_S = 5.0  # --settle
SHOW_SCREEN = False  # --show: the last screen goes into each result
RAW_DIR: Path | None = None  # --raw DIR: each run's bytes as written, and when (for scripts/pty_bytes_by_row.py)
NVITOP_READY = re.compile(r"PID\s+USER|No running processes|NVITOP", re.I)


class PtyRun:
    """A program under a pty of a given size; a reader thread counts bytes and feeds a pyte screen."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int, rows: int):
        self.cols, self.rows = cols, rows
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.lock = threading.Lock()
        self.bytes = 0
        self.started = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:  # child: the pty is already its controlling terminal
            fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = psutil.Process(pid)
        self.done = False
        self.raw = self.raw_index = None
        if RAW_DIR is not None:
            name = f"{Path(argv[2] if argv[1:2] == ['-m'] else argv[0]).name}-{cols}x{rows}-{pid}"
            self.raw = (RAW_DIR / f"{name}.bytes").open("wb")
            self.raw_index = (RAW_DIR / f"{name}.idx").open("w")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.done:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                if self.raw is not None:
                    self.raw_index.write(f"{time.monotonic() - self.started:.3f} {self.bytes}\n")
                    self.raw.write(chunk)
                self.bytes += len(chunk)
                self.stream.feed(chunk)

    def text(self) -> str:
        with self.lock:
            return "\n".join(self.screen.display)

    def wait_for(self, pattern: re.Pattern, present: bool = True, timeout: float = 60.0) -> float | None:
        """Seconds until the screen matches (or stops matching) `pattern`; None on timeout."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if bool(pattern.search(self.text())) == present:
                return time.monotonic() - start
            time.sleep(0.005)
        return None

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def tree(self) -> list[psutil.Process]:
        try:
            return [self.proc, *self.proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def cpu_seconds(self) -> dict[int, float]:
        out = {}
        for p in self.tree():
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return out

    def rss_mb(self) -> tuple[float, float]:
        """(the program's own RSS, the whole tree's) in MB."""
        own = total = 0.0
        for p in self.tree():
            try:
                rss = p.memory_info().rss / 1e6
            except psutil.NoSuchProcess:
                continue
            total += rss
            if p.pid == self.pid:
                own = rss
        return own, total

    def stop(self) -> None:
        self.done = True
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        for _ in range(100):
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.05)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)
        if self.raw is not None:
            self.raw.close()
            self.raw_index.close()


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def measure(argv, env, cols, rows, seconds, keys, ready, toggle=None) -> dict:
    run = PtyRun(argv, env, cols, rows)
    try:
        first = run.wait_for(ready, timeout=120)
        if first is None:
            return {"error": "no first frame in 120 s", "screen": run.text()}
        first_frame_s = time.monotonic() - run.started
        # Let start-up (imports, probe hello, first samples) settle out of the window. With a long settle,
        # seconds 30-90 are measured too: the history still filling (each new sample a new column).
        filling = None
        if SETTLE_S >= 95:
            time.sleep(30)
            fill0, fill_bytes0, fill_t0 = run.cpu_seconds(), run.bytes, time.monotonic()
            time.sleep(60)
            fill1, fill_t1 = run.cpu_seconds(), time.monotonic()
            filling = {"cpu_pct_dashboard_only": round(100 * (fill1.get(run.pid, 0.0) - fill0.get(run.pid, 0.0))
                                                       / (fill_t1 - fill_t0), 2),
                       "bytes_per_min": round(60 * (run.bytes - fill_bytes0) / (fill_t1 - fill_t0))}
            time.sleep(SETTLE_S - 90)
        else:
            time.sleep(SETTLE_S)
        cpu0, bytes0, t0 = run.cpu_seconds(), run.bytes, time.monotonic()
        rss_peak = (0.0, 0.0)
        while time.monotonic() - t0 < seconds:
            time.sleep(1)
            own, total = run.rss_mb()
            rss_peak = (max(rss_peak[0], own), max(rss_peak[1], total))
        cpu1, bytes1, t1 = run.cpu_seconds(), run.bytes, time.monotonic()
        elapsed = t1 - t0
        cpu = sum(v - cpu0.get(pid, 0.0) for pid, v in cpu1.items())
        own_cpu = cpu1.get(run.pid, 0.0) - cpu0.get(run.pid, 0.0)
        latencies = []
        if toggle is not None:
            key, marker = toggle
            for n in range(keys * 2):
                showing = n % 2 == 0
                time.sleep(0.3)
                sent = time.monotonic()
                run.send(key)
                if run.wait_for(marker, present=showing, timeout=10) is None:
                    break
                latencies.append((time.monotonic() - sent) * 1000)
        return {
            "size": f"{cols}x{rows}",
            "first_frame_s": round(first_frame_s, 2),
            "cpu_pct_of_core": round(100 * cpu / elapsed, 2),
            "cpu_pct_dashboard_only": round(100 * own_cpu / elapsed, 2),
            "rss_mb": round(rss_peak[0], 1),
            "rss_tree_mb": round(rss_peak[1], 1),
            "bytes_per_min": round(60 * (bytes1 - bytes0) / elapsed),
            "window_s": round(elapsed, 1),
            "key_to_frame_ms_p50": None if not latencies else round(percentile(latencies, 50), 1),
            "key_to_frame_ms_p95": None if not latencies else round(percentile(latencies, 95), 1),
            "keys": len(latencies),
            **({"seconds_30_to_90": filling} if filling else {}),
            **({"screen": run.text()} if SHOW_SCREEN else {}),
        }
    finally:
        run.stop()


def write_hosts(base: Path, hosts: int, gpus: int) -> tuple[Path, list[subprocess.Popen]]:
    """`hosts` local hosts on the nvidia-smi stand-in, each with one real 'training' process on GPU 0."""
    sys.path.insert(0, str(ROOT))
    from tests.support.fake_nvidia_smi import install_fake_nvidia_smi
    from tests.support.fake_smi_scenario import write_scenario

    bindir = base / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    install_fake_nvidia_smi(bindir)
    train = base / "train.py"
    train.write_text("import sys, time\nn = 0\nwhile True:\n    n += 1\n    print(f'step {n} loss 0.5', flush=True)\n"
                     "    time.sleep(1)\n")
    procs, lines = [], ["[settings]", "sample_interval = 1.0", "history = 60", ""]
    for i in range(hosts):
        log = (base / f"train-{i}.log").open("w")
        proc = subprocess.Popen([sys.executable, str(train)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=base)
        procs.append(proc)
        scenario = base / f"host-{i:02d}.json"
        write_scenario(scenario, gpus=gpus, phase="training", uuid_prefix=f"GPU-{i:03d}",
                       processes=[{"gpu": g, "pid": proc.pid, "used_memory_mib": 40000, "name": "python"}
                                  for g in range(gpus)])
        lines += ["[[hosts]]", f'name = "host-{i:02d}"', "local = true", 'gpu_source = "nvidia-smi"',
                  f'env = {{ PATH = "{bindir}:/usr/local/bin:/usr/bin:/bin", GPUWATCH_FAKE_SMI = "{scenario}" }}', ""]
    config = base / "hosts.toml"
    config.write_text("\n".join(lines))
    return config, procs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--this-machine", action="store_true", help="no config: watch this machine")
    parser.add_argument("--sizes", default="80x24,200x50,300x80")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--keys", type=int, default=10, help="g presses each way for key->frame")
    parser.add_argument("--nvitop", action="store_true", help="measure `nvitop --interval 1` too")
    parser.add_argument("--fake-nvml", action="store_true", help="nvitop on the NVML stand-in")
    parser.add_argument("--together", action="store_true", help="measure nvitop in the same minute, not after")
    parser.add_argument("--sizes-together", action="store_true",
                        help="every size (and nvitop at each) at the same time: one window for all")
    parser.add_argument("--reps", type=int, default=1, help="measure every size this many times")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the first frame before measuring")
    parser.add_argument("--show", action="store_true", help="print each run's last screen")
    parser.add_argument("--raw", help="keep every run's bytes as written (NAME.bytes) and when (NAME.idx) here")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    global SHOW_SCREEN, SETTLE_S, RAW_DIR
    SHOW_SCREEN, SETTLE_S = args.show, args.settle
    if args.raw:
        RAW_DIR = Path(args.raw)
        RAW_DIR.mkdir(parents=True, exist_ok=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env.update(TERM="xterm-256color", COLORTERM="truecolor",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    results = {"hosts": "this machine" if args.this_machine else f"{args.hosts} local x {args.gpus} GPUs (stand-in)",
               "cpus": os.cpu_count(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="gpuwatch-pty-") as tmp:
        base = Path(tmp)
        env["HOME"] = str(base / "home")  # no user config, no user themes, no rolling recording elsewhere
        env["XDG_CONFIG_HOME"] = str(base / "home" / ".config")
        env["XDG_DATA_HOME"] = str(base / "home" / ".local" / "share")
        env["XDG_STATE_HOME"] = str(base / "home" / ".local" / "state")
        procs = []
        argv = [sys.executable, "-m", "gpuwatch_tui.cli"]
        if not args.this_machine:
            config, procs = write_hosts(base, args.hosts, args.gpus)
            argv += ["--config", str(config)]
        nv_env = dict(env)
        if args.nvitop and args.fake_nvml:
            from tests.support.fake_nvml import build_fake_nvml, fake_nvml_env

            nv_env = fake_nvml_env(build_fake_nvml(base / "nvml"), args.gpus, [p.pid for p in procs], nv_env)
        nvitop = [sys.executable, "-m", "nvitop", "--interval", "1"]

        def run_one(tool: str, cols: int, rows: int, rep: int) -> dict:
            if tool == "gpuwatch":
                result = measure(argv, env, cols, rows, args.seconds, args.keys, GPUWATCH_READY, (b"g", PROCESS_VIEW))
            else:
                result = measure(nvitop, nv_env, cols, rows, args.seconds, 0, NVITOP_READY)
            return {"tool": tool if tool == "gpuwatch" else "nvitop --interval 1", "rep": rep, **result}

        def report(result: dict) -> None:
            results["runs"].append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "screen"}), flush=True)
            if args.show:
                print(result.get("screen", ""))

        def run_all(runs: list[tuple[str, int, int]], rep: int) -> None:
            """Every (tool, cols, rows) in `runs` at the same time, each under its own pty."""
            done: dict[int, dict] = {}
            threads = [threading.Thread(target=lambda n=n, r=r: done.__setitem__(n, run_one(*r, rep)))
                       for n, r in enumerate(runs)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for n in range(len(runs)):
                report(done[n])

        tools = ["gpuwatch", "nvitop"] if args.nvitop else ["gpuwatch"]
        sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes.split(",")]
        try:
            for rep in range(args.reps):
                if args.sizes_together:
                    run_all([(tool, cols, rows) for cols, rows in sizes for tool in tools], rep)
                    continue
                for cols, rows in sizes:
                    if args.together:
                        run_all([(tool, cols, rows) for tool in tools], rep)
                    else:
                        for tool in tools:
                            report(run_one(tool, cols, rows, rep))
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

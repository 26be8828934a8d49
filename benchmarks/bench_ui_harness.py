"""Shared parts of the UI benchmarks: a synthetic fleet source and a tmux driver.

Key latency is measured on `p` (the pause mark; 40 presses) and, as a key that changes layout
and focus, on `/` (20 presses): until the filter line shows, and until the footer shows the
filter's bindings (Textual rebuilds the footer on a focus change).

The app runs in a real terminal (tmux), so rendering and terminal output are part of the cost.
Figures: CPU share of one core and RSS of the dashboard process (from /proc), first-frame time
(spawn -> content on screen, Python start-up included) and keypress-to-screen latency (send-keys
-> capture-pane shows the change; tmux's own polling adds a little).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.model import GpuProcess, GpuSample, HostSample  # noqa: E402
from gpuwatch_tui.store import Store  # noqa: E402
from gpuwatch_tui.views import JobView  # noqa: E402

LOG_LIMIT = 10_000


class SyntheticFleet:
    """DashboardSource: N hosts x G GPUs; each host's frame arrives on its own, 1 Hz per host."""

    def __init__(self, hosts: int = 128, gpus: int = 8, history: int = 60, flood_lines_per_s: int = 0) -> None:
        self.names = [f"node-{i:03d}" for i in range(hosts)]
        self.store = Store(self.names, history)
        self.gpus = gpus
        self.paused = False
        self._callbacks: list[Callable[[], None]] = []
        self._stop = asyncio.Event()
        self._tick = 0
        self.flood = flood_lines_per_s
        self._log: deque[str] = deque(maxlen=LOG_LIMIT)
        self._log_total = 0
        self._jobs = [
            JobView.from_json(
                {"id": f"{name}:1000", "name": f"train-{i:03d}", "host": name, "pids": [1000],
                 "gpus": list(range(gpus)), "phase": "training", "detail": None, "since": time.time() - 3600,
                 "confidence": 0.9, "evidence": ["GPUs busy"], "advice": "nothing to do", "log": "/tmp/x.log",
                 "exit_code": None,
                 "progress": {"step": 0, "total": 100000, "rate": 3.0, "unit": "it", "loss": 2.0, "epoch": 1,
                              "eta_s": 30000.0},
                 "history": [{"phase": "training", "since": time.time() - 3600}]})
            for i, name in enumerate(self.names)
        ]
        self._history = history
        for name in self.names:
            self.store.set_state(name, "connected")

    def _sample(self, name: str) -> None:
        self._tick += 1
        t = self._tick
        samples = [GpuSample(g, f"GPU-{name}-{g}", "NVIDIA H200", 95 + 5 * math.sin(t / 7 + g), 138000.0, 143771.0,
                             65.0 + (t + g) % 5, 680 + (t * 7 + g) % 20, 700.0, 1980.0, processes=(GpuProcess(1000, 138000.0),))
                   for g in range(self.gpus)]
        self.store.apply_sample(name, HostSample(time.time(), "nvml", samples, {}))

    def now(self) -> float:
        return time.time()

    def jobs(self) -> list[JobView]:
        return self._jobs

    def job_log(self, job_id: str) -> list[str]:
        return list(self._log)

    def job_log_total(self, job_id: str) -> int:
        return self._log_total

    def job_procs(self, job_id: str):
        return []

    def job_outdir(self, job_id: str):
        return None

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def _notify(self) -> None:
        for callback in self._callbacks:
            callback()

    async def _hosts_loop(self) -> None:
        # 128 frames per second, each host once a second, spread evenly as real links are.
        gap = 1.0 / len(self.names)
        i = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            name = self.names[i % len(self.names)]
            self._sample(name)
            if i % len(self.names) == 0:
                self._jobs = [  # views are frozen: a new one per step, as the tracker makes
                    dataclasses.replace(job, progress=dataclasses.replace(job.progress, step=job.progress.step + 3))
                    for job in self._jobs
                ]
            i += 1
            self._notify()
            next_at += gap
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def _flood_loop(self) -> None:
        chunk_every = 0.05
        per_chunk = int(self.flood * chunk_every)
        n = 0
        while not self._stop.is_set():
            self._log.extend(f"step {n + k} | loss 2.0000 | lr 3e-4 | tok/s 412,000" for k in range(per_chunk))
            n += per_chunk
            self._log_total += per_chunk
            self._notify()
            await asyncio.sleep(chunk_every)

    async def _fill_history(self) -> None:
        """A fleet that has been watched a while: full sparklines. Built after the app started
        (a host at a time, yielding between) so it is not part of the first-frame figure; a
        real start has no history either."""
        for _ in range(self._history - 1):
            for name in self.names:
                self._sample(name)
            await asyncio.sleep(0)

    async def run(self) -> None:
        tasks = []
        if self.flood:
            tasks.append(asyncio.ensure_future(self._flood_loop()))
        await asyncio.sleep(0.05)  # the first frame first
        await self._fill_history()
        tasks.append(asyncio.ensure_future(self._hosts_loop()))
        await self._stop.wait()
        for task in tasks:
            task.cancel()

    async def stop(self) -> None:
        self._stop.set()


def serve(open_first_job: bool, flood: int) -> None:
    """Run the dashboard in this terminal (called inside tmux)."""
    from gpuwatch_tui.ui.app import GpuwatchApp

    source = SyntheticFleet(flood_lines_per_s=flood)
    app = GpuwatchApp(source)
    if open_first_job:
        app.call_later(lambda: app.open_job(source.jobs()[0].id))
    # The synthetic fleet's history is built above; the app's own start counts from here.
    Path(os.environ["BENCH_APP_START_FILE"]).write_text(repr(time.time()))
    profile = os.environ.get("BENCH_PROFILE")
    if not profile:
        app.run()
        return
    from pyinstrument import Profiler  # pip install pyinstrument

    profiler = Profiler(interval=0.0005)
    profiler.start()
    try:
        app.run()
    finally:
        profiler.stop()
        Path(profile).write_text(profiler.output_text(unicode=True, show_all=False))
        profiler.last_session.save(profile + ".pyisession")  # pyinstrument --load FILE.pyisession


# -- the driver --------------------------------------------------------------------------------


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def capture(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_env(env: dict[str, str]) -> list[str]:
    """`env ...` arguments for a program started in tmux. The tmux server passes on its own
    environment; PYTHONDONTWRITEBYTECODE (set in some sandboxes) would make every start compile
    gpuwatch from source, which no installed copy does, so it is removed."""
    return ["env", "-u", "PYTHONDONTWRITEBYTECODE", *[f"{k}={v}" for k, v in env.items()]]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def drive(script: str, args: list[str], ready: Callable[[str], bool], toggled: Callable[[str], bool],
          measure_s: float = 20.0, presses: int = 40, profile: str | None = None,
          ready_timeout: float = 60.0) -> dict:
    """Run `script --serve ARGS` in tmux and measure it. With `profile`, the app runs under
    pyinstrument and quits with `q` at the end; the call tree is written to that file."""
    session = f"gpuwatch-bench-{os.getpid()}"
    start_file = Path(f"/tmp/gpuwatch-bench-{os.getpid()}.start")
    start_file.unlink(missing_ok=True)
    env = {"BENCH_APP_START_FILE": str(start_file), "PYTHONPATH": str(ROOT / "src"), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    if profile:
        env["BENCH_PROFILE"] = str(Path(profile).resolve())
    start = time.monotonic()
    tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", *child_env(env),
         sys.executable, script, "--serve", *args)
    try:
        pid = int(tmux("display", "-p", "-t", session, "#{pane_pid}").strip())
        while not ready(capture(session)):
            if time.monotonic() - start > ready_timeout:
                raise SystemExit("the dashboard did not come up:\n" + capture(session))
            time.sleep(0.005)
        first_frame = time.monotonic() - start
        first_frame_from_app = time.time() - float(start_file.read_text())
        time.sleep(2.0)  # let start-up settle
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        rss_samples = []
        while time.monotonic() - t0 < measure_s:
            time.sleep(0.5)
            rss_samples.append(rss_mb(pid))
        cpu_share = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        latencies = []
        state = toggled(capture(session))
        for _ in range(presses):
            sent = time.monotonic()
            tmux("send-keys", "-t", session, "p")
            while toggled(capture(session)) == state:
                if time.monotonic() - sent > 5:
                    raise SystemExit("no reaction to a key in 5 s")
                time.sleep(0.002)
            latencies.append(time.monotonic() - sent)
            state = not state
            time.sleep(0.15)
        # A key that changes layout and focus, not only a mark: `/` opens the filter line (the
        # footer's bindings change); Escape closes it again (not timed: a lone ESC waits for a
        # possible escape sequence by design).
        filter_latencies, footer_latencies = [], []
        for _ in range(presses // 2):
            sent = time.monotonic()
            tmux("send-keys", "-t", session, "/")
            shown = None
            while True:
                screen = capture(session)
                if shown is None and "filter hosts and jobs" in screen:
                    shown = time.monotonic() - sent
                # The filter is typed on the summary line: focus and footer stay as they are.
                if shown is not None:
                    break
                if time.monotonic() - sent > 5:
                    raise SystemExit("no reaction to / in 5 s")
                time.sleep(0.002)
            footer_latencies.append(time.monotonic() - sent)
            filter_latencies.append(shown if shown is not None else footer_latencies[-1])
            tmux("send-keys", "-t", session, "Escape")
            deadline = time.monotonic() + 5
            while "filter hosts and jobs" in capture(session) and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.15)
        rss_samples.append(rss_mb(pid))
        if profile:
            tmux("send-keys", "-t", session, "q")
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        return {
            "first_frame_s": round(first_frame_from_app, 3),
            "first_frame_from_spawn_s": round(first_frame, 3),
            "cpu_share_of_one_core": round(cpu_share, 3),
            "rss_mb_max": round(max(rss_samples), 1),
            "rss_mb_first": round(rss_samples[0], 1),
            "rss_mb_last": round(rss_samples[-1], 1),
            "key_latency_ms_p50": round(1000 * percentile(latencies, 50), 1),
            "key_latency_ms_p95": round(1000 * percentile(latencies, 95), 1),
            "key_latency_ms_max": round(1000 * max(latencies), 1),
            "key_latencies_ms": [round(1000 * v) for v in latencies],
            "filter_key_latency_ms_p50": round(1000 * percentile(filter_latencies, 50), 1),
            "filter_key_latency_ms_p95": round(1000 * percentile(filter_latencies, 95), 1),
            "filter_key_footer_updated_ms_p50": round(1000 * percentile(footer_latencies, 50), 1),
            "filter_key_footer_updated_ms_p95": round(1000 * percentile(footer_latencies, 95), 1),
        }
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)

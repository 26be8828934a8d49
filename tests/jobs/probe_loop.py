"""The real probe as a subprocess on this machine, feeding a real JobTracker frame by frame, the way a
host session does (frame in, the tracker's wants back out)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Callable

from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv
from gpuwatch_tui.feeds.probe_frames import parse_sample


class ProbeLoop:
    def __init__(self, tracker: JobTracker, interval: float = 1.0, scan_interval: float = 5.0, host: str = "h"):
        self.tracker = tracker
        self.host = host
        self.frames = 0
        self.last_frame: dict = {}
        self.probe = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.probe.stdin.write(build_payload({"interval": interval, "scan_interval": scan_interval,
                                              "gpu_source": "none"}))
        self.probe.stdin.flush()

    def step(self) -> None:
        """Read one sample frame, feed it, and send the tracker's wants back."""
        while True:
            line = self.probe.stdout.readline()
            assert line, "the probe exited"
            frame = json.loads(line)
            if frame.get("type") == "sample":
                break
        self.frames += 1
        self.last_frame = frame
        now = time.time()
        self.tracker.update(self.host, parse_sample(frame), now)
        wants = self.tracker.wanted(self.host)
        req = {"op": "want", **asdict(wants)}
        self.probe.stdin.write(json.dumps(req).encode() + b"\n")
        self.probe.stdin.flush()

    def run_until(self, done: Callable[[], bool], timeout: float, each: Callable[[], None] | None = None) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.step()
            if each is not None:
                each()
            if done():
                return True
        return False

    def close(self) -> None:
        try:
            self.probe.stdin.close()
        except OSError:
            pass
        try:
            self.probe.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.probe.kill()
            self.probe.wait()

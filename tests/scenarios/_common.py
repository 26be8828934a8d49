"""Shared by the scenario programs: arguments and a real (tiny, pure-Python) training step.

Scenario programs are real processes started by end-to-end tests as
`nohup python train.py --steps N --step-time S > train.log 2>&1 &`. Standard library only.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time


def parse_args(description: str, steps: int = 20, step_time: float = 0.2, extra=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=steps, help="training steps")
    parser.add_argument("--step-time", type=float, default=step_time, help="seconds of real work per step")
    if extra is not None:
        extra(parser)
    return parser.parse_args()


class TinyModel:
    """Linear regression fitted by SGD: enough to make the loss real and keep a core busy."""

    def __init__(self, dim: int = 16, seed: int = 0):
        rng = random.Random(seed)
        self.rng = rng
        self.true_w = [rng.uniform(-1, 1) for _ in range(dim)]
        self.w = [0.0] * dim
        self.lr = 0.01

    def step(self, seconds: float) -> float:
        """Train for `seconds` of wall time (busy CPU); returns the mean loss of the step."""
        deadline = time.monotonic() + seconds
        total, n = 0.0, 0
        while True:
            x = [self.rng.gauss(0, 1) for _ in self.w]
            y = sum(a * b for a, b in zip(self.true_w, x)) + self.rng.gauss(0, 0.3)  # noisy: loss stays real
            pred = sum(a * b for a, b in zip(self.w, x))
            err = pred - y
            for i, xi in enumerate(x):
                self.w[i] -= self.lr * err * xi
            total += err * err
            n += 1
            if n % 64 == 0 and time.monotonic() >= deadline:
                break
        return total / n


def fmt_clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    m, s = divmod(seconds, 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tqdm_frame(desc: str, n: int, total: int, elapsed: float, postfix: str = "") -> str:
    """One frame in tqdm's own format ({l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}])."""
    frac = n / total if total else 0.0
    filled = int(frac * 10)
    bar = "█" * filled + ("▌" if frac * 10 - filled >= 0.5 and filled < 10 else "")
    bar = bar.ljust(10)
    rate = n / elapsed if elapsed > 0 else 0.0
    if rate >= 1 or rate == 0:
        rate_s = f"{rate:.2f}it/s" if rate else "?it/s"
    else:
        rate_s = f"{1 / rate:.2f}s/it"
    remaining = (total - n) / rate if rate else 0
    head = f"{desc}: " if desc else ""
    tail = f", {postfix}" if postfix else ""
    return f"{head}{frac * 100:3.0f}%|{bar}| {n}/{total} [{fmt_clock(elapsed)}<{fmt_clock(remaining) if rate else '?'}, {rate_s}{tail}]"


def bar_write(frame: str, stream=None) -> None:
    stream = stream or sys.stderr
    stream.write("\r" + frame)
    stream.flush()


def loss_curve(step: int) -> float:
    return 2.5 * math.exp(-step / 30.0) + 0.1

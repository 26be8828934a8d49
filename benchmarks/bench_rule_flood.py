"""A flood of 10,000 log lines a second through the log tail, the built-in rules and the interpreter.

Three mixes, each fed as the probe delivers it (bytes in chunks, one chunk per 100 ms of log time):
  steady   training lines of many frameworks' shapes with new numbers on every line (what a busy log is)
  unique   every line a new shape (words and hex ids that never repeat): each is searched by every rule
           that its text allows, the prefilter's worst case
  captured the captured and published logs in tests/data, each line once (first sight of every shape)
Reports CPU microseconds per line and the share of one core that 10k lines/s costs (the rule plan, made
once when the rules are first used, is timed apart).

    python benchmarks/bench_rule_flood.py [--lines 100000] [--rate 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.logtail import LogBuffer
from gpuwatch_tui.jobs.rules import RuleSet

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"

# One line of each shape, "{}" for a number that changes from line to line.
STEADY_SHAPES = [
    "{'loss': {}.{}, 'grad_norm': {}.{}, 'learning_rate': {}e-05, 'epoch': {}.{}}",
    "Epoch {}:  {}%|#####     | {}/{} [{}:{}<{}:{}, {}.{}it/s, v_num={}, train_loss={}.{}]",
    "{}%|##########| {}/{} [{}:{}<{}:{}, {}.{}it/s]",
    "step {} | loss {}.{} | lr {}.{}e-04 | tok/s {}",
    "iter {}: loss {}.{}, time {}.{}ms, mfu {}.{}%",
    "{}-{}-{} {}:{}:{},{} - mmengine - INFO - Epoch(train)  [{}][{}/{}]  lr: {}.{}e-02  eta: {}:{}:{}  "
    "time: {}.{}  data_time: {}.{}  memory: {}  loss: {}.{}  loss_cls: {}.{}",
    "[{}-{}-{} {}:{}:{}] INFO: epoch {}:  {} / {} loss={}.{}, ppl={}.{}, wps={}, ups={}.{}, lr={}.{}",
    "{}/{} [==============>...............] - ETA: {}s - loss: {}.{} - accuracy: {}.{}",
    "Train Epoch: {} [{}/{} ({}%)]\tLoss: {}.{}",
    "[{}:{}:{} d2.utils.events]:  eta: {}:{}:{}  iter: {}  total_loss: {}.{}  loss_cls: {}.{}  lr: {}.{}",
    " iteration {}/ {} | consumed samples: {} | elapsed time per iteration (ms): {}.{} | lm loss: {}.{}E+00 |",
    "[rank{}]: [titan] {}-{}-{} {}:{}:{},{} - root - INFO - step: {}  loss: {}.{}  memory: {}.{}GiB({}.{}%)  "
    "tps: {}  tflops: {}.{}  mfu: {}.{}%",
    "      {}/{}      {}.{}G      {}.{}      {}.{}      {}.{}        {}        {}: {}%|###  | {}/{} [{}:{}<{}:{}, "
    "{}.{}it/s]",
    "INFO:tensorflow:loss = {}.{}, step = {} ({}.{} sec)",
]

UNIQUE_WORDS = ("loading", "worker", "request", "batch", "shard", "config", "module", "tensor", "cache", "node")


def steady_lines(n: int, rng: random.Random) -> list[str]:
    """Each number slot keeps its width (a step counter, a loss with fixed decimals), as in real logs."""
    shapes = [(shape.split("{}"), [rng.randrange(1, 5) for _ in range(shape.count("{}"))]) for shape in STEADY_SHAPES]
    out = []
    for i in range(n):
        parts, widths = shapes[i % len(shapes)]
        numbers = [str(rng.randrange(10 ** (w - 1), 10 ** w)) for w in widths]
        out.append("".join(p + v for p, v in zip(parts, numbers)) + parts[-1])
    return out


def unique_lines(n: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(n):
        words = " ".join(rng.choice(UNIQUE_WORDS) + format(rng.getrandbits(24), "x") for _ in range(6))
        out.append(f"INFO {words} took {rng.random():.3f}s")
    return out


def captured_lines() -> list[str]:
    out = []
    for folder in ("logs", "published_logs"):
        for path in sorted((DATA / folder).rglob("*.log")):
            text = path.read_bytes().decode("utf-8", "replace")
            out += [part for line in text.split("\n") for part in line.split("\r") if part]
    return out


def flood(lines: list[str], rate: int) -> dict:
    data = [(line + "\n").encode() for line in lines]
    per_chunk = max(1, rate // 10)
    chunks = [b"".join(data[i:i + per_chunk]) for i in range(0, len(data), per_chunk)]
    buf = LogBuffer(max_lines=5000)
    rules = RuleSet.with_user_rules()
    prepared = time.process_time()
    rules.match("")  # the rule plan (each rule's needed text, which rules read digits) is made once, at first use
    prepared = time.process_time() - prepared
    interp = LogInterpreter(rules)
    t = 1000.0
    start = time.process_time()
    for chunk in chunks:
        t += 0.1
        buf.feed_bytes(chunk, t)
        interp.feed_lines([line.text for line in buf.take_new()], t)
    spent = time.process_time() - start
    us = 1e6 * spent / len(lines)
    return {"lines": len(lines), "us_per_line": round(us, 2), "core_share_at_rate": round(us * rate / 1e6, 3),
            "plan_ms_once": round(1e3 * prepared, 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=10_000, help="lines per second of log time")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs per mix")
    args = ap.parse_args()
    rng = random.Random(7)
    mixes = {
        "steady": steady_lines(args.lines, rng),
        "unique": unique_lines(args.lines // 5, rng),
        "captured": captured_lines(),
    }
    RuleSet.with_user_rules()  # the built-in pack parsed once, outside the timings
    result: dict = {"rate_lines_per_s": args.rate}
    for name, lines in mixes.items():
        if lines:
            result[name] = min((flood(lines, args.rate) for _ in range(args.repeats)), key=lambda r: r["us_per_line"])
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

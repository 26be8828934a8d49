"""gpuwatch's memory while a probe stream carries garbage: RSS sampled over 60 s (goal: flat).

A local child stands in for a hostile host's probe: it prints a hello, then at full speed blocks of
lines that are not JSON (50 of them, 80-200 bytes, escapes included) each followed by one valid frame,
so the stream never crosses the junk bound and the link keeps reading for the whole run. The real
ProbeLink.next_frame reads it; this process's RSS is printed every 5 s.

    python benchmarks/bench_garbage_stream_rss.py [--seconds 60] [--json FILE] [--src DIR]

--src reads another tree's gpuwatch_tui (e.g. an export of an older commit) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(ROOT / "src")
sys.path.insert(0, SRC)

from gpuwatch_tui.transport.link import FRAME_LIMIT, ProbeLink  # noqa: E402

EMITTER = r"""
import os, random, sys
out = sys.stdout.buffer
out.write(b'{"type":"hello","v":1}\n')
rnd = random.Random(1)
junk = [b"garbage \x1b]2;x\x07 " + bytes(rnd.randrange(32, 127) for _ in range(rnd.randrange(80, 200))) + b"\n"
        for _ in range(50)]
block = b"".join(junk) + b'{"type":"pong"}\n'
while True:
    out.write(block * 20)
"""


class PipeLink(ProbeLink):
    def __init__(self, proc) -> None:
        super().__init__()
        self.reader = proc.stdout
        self.writer = proc.stdin


async def main(seconds: float) -> dict:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", EMITTER, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, limit=FRAME_LIMIT)
    link = PipeLink(proc)
    me = psutil.Process()
    await link.next_frame()  # the hello
    frames = 0
    samples = []
    start = time.monotonic()
    next_at = start
    try:
        while True:
            now = time.monotonic()
            if now >= next_at:
                rss = me.memory_info().rss / 2**20
                samples.append({"t_s": round(now - start, 1), "rss_mib": round(rss, 1), "junk_lines": getattr(link, "junk_lines", None),
                                "frames": frames})
                print(f"t={now - start:5.1f}s rss={rss:7.1f} MiB junk lines={getattr(link, 'junk_lines', '?')!s:>10} frames={frames}",
                      flush=True)
                next_at += 5
                if now - start >= seconds:
                    break
            await link.next_frame()
            frames += 1
    finally:
        proc.kill()
        await proc.wait()
    junk_lines = frames * 50  # 50 junk lines before each frame, ~140 bytes each
    return {"seconds": seconds, "samples": samples, "junk_mib_read": round(junk_lines * 140 / 2**20, 1),
            "rss_growth_mib": round(samples[-1]["rss_mib"] - samples[1]["rss_mib"], 1)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--json")
    parser.add_argument("--src")
    args = parser.parse_args()
    result = asyncio.run(main(args.seconds))
    result["src"] = SRC
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")

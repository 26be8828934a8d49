"""Where a dashboard's bytes go: a stream kept by `benchmarks/bench_dash_pty.py --raw DIR`, cut at its
cursor moves and summed by screen row, from --skip seconds after the start to --until (the bench presses
keys after its measured window: leave those out with --until settle + seconds).

    python scripts/pty_bytes_by_row.py DIR/gpuwatch_tui.cli-200x50-1234 --skip 65 --until 95
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

MOVE = re.compile(rb"\x1b\[(\d+);(\d+)H")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stem", help="the path of a run's .bytes and .idx files, without the suffix")
    parser.add_argument("--skip", type=float, default=65.0, help="seconds after the start left out")
    parser.add_argument("--until", type=float, default=float("inf"), help="seconds after the start: the end")
    args = parser.parse_args()
    data = Path(args.stem + ".bytes").read_bytes()
    marks = [(float(t), int(at)) for t, at in (line.split() for line in Path(args.stem + ".idx").open())]
    inside = [(t, at) for t, at in marks if args.skip <= t <= args.until]
    if not inside:
        raise SystemExit(f"nothing was written between {args.skip} s and {args.until} s")
    after = [at for t, at in marks if t > args.until]
    window = data[inside[0][1]:after[0] if after else len(data)]
    span = max(1.0, (args.until if after else inside[-1][0]) - args.skip)
    by_row: Counter[int] = Counter()
    cells: Counter[int] = Counter()
    moves = list(MOVE.finditer(window))
    for n, move in enumerate(moves):
        end = moves[n + 1].start() if n + 1 < len(moves) else len(window)
        row = int(move.group(1))
        by_row[row] += end - move.start()
        cells[row] += 1
    print(f"{len(window)} bytes in {span:.0f} s ({60 * len(window) / span:.0f} a minute), {len(moves)} cursor moves")
    print("row  bytes/min  moves/min")
    for row, count in sorted(by_row.items()):
        print(f"{row:3d}  {60 * count / span:9.0f}  {60 * cells[row] / span:9.0f}")


if __name__ == "__main__":
    main()

"""Prints progress with print() and no flush while keeping a core busy. Started without -u and
with stdout to a file, its log stays empty until the buffer fills or the process exits."""

import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, parse_args  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, steps=1000, step_time=0.5)
    model = TinyModel()
    for step in range(1, args.steps + 1):
        loss = model.step(args.step_time)
        print(f"step {step}/{args.steps} loss {loss:.4f}")  # no flush: block-buffered in a file


if __name__ == "__main__":
    main()

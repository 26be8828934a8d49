"""Trains for --steps steps, logging each, then exits 0 with a completion line."""

import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, parse_args  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, steps=10, step_time=0.1)
    model = TinyModel()
    for step in range(1, args.steps + 1):
        loss = model.step(args.step_time)
        print(f"step {step}/{args.steps} loss {loss:.4f}", flush=True)
    print("Training completed", flush=True)


if __name__ == "__main__":
    main()

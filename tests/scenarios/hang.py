"""Trains --steps steps (logging each, flushed), then blocks forever on a lock: CPU flat, state S."""

import os, sys, threading  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, parse_args  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, steps=5, step_time=0.2)
    model = TinyModel()
    for step in range(1, args.steps + 1):
        print(f"step {step}/{args.steps * 10} loss {model.step(args.step_time):.4f}", flush=True)
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # deadlock: nobody will release it


if __name__ == "__main__":
    main()

"""Trains --steps steps, then raises: a traceback in the log and exit status 1."""

import os, sys  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, parse_args  # noqa: E402


def train_step(model, step, step_time, fail_at):
    if step == fail_at:
        raise RuntimeError(f"loss became nan at step {step}")
    return model.step(step_time)


def main() -> None:
    args = parse_args(__doc__, steps=5, step_time=0.2)
    model = TinyModel()
    for step in range(1, args.steps * 10):
        print(f"step {step}/{args.steps * 10} loss {train_step(model, step, args.step_time, args.steps + 1):.4f}",
              flush=True)


if __name__ == "__main__":
    main()

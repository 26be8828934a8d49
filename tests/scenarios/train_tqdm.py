"""A plain loop with a tqdm bar (the real tqdm when installed; its exact format otherwise)."""

import os, sys, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, bar_write, parse_args, tqdm_frame  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, steps=30, step_time=0.1)
    model = TinyModel()
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(range(args.steps), desc="train", mininterval=0)
        for _ in bar:
            bar.set_postfix(loss=f"{model.step(args.step_time):.4f}")
        bar.close()
        return
    start = time.monotonic()
    for step in range(1, args.steps + 1):
        loss = model.step(args.step_time)
        bar_write(tqdm_frame("train", step, args.steps, time.monotonic() - start, f"loss={loss:.4f}"))
    sys.stderr.write("\n")


if __name__ == "__main__":
    main()

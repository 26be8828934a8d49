"""Prints Lightning's TQDMProgressBar output: "Epoch N: ...| n/total [..., v_num=0, train_loss=...]"
frames with carriage returns on stderr, a Validation bar after each epoch, and the fit-stopped line."""

import os, sys, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, bar_write, parse_args, tqdm_frame  # noqa: E402


def main() -> None:
    def extra(p):
        p.add_argument("--epochs", type=int, default=2)
    args = parse_args(__doc__, steps=10, step_time=0.1, extra=extra)
    print("GPU available: False, used: False", flush=True)
    print("TPU available: False, using: 0 TPU cores", flush=True)
    model = TinyModel()
    for epoch in range(args.epochs):
        start = time.monotonic()
        for step in range(1, args.steps + 1):
            loss = model.step(args.step_time)
            bar_write(tqdm_frame(f"Epoch {epoch}", step, args.steps, time.monotonic() - start,
                                 f"v_num=0, train_loss={loss:.3f}"))
        sys.stderr.write("\n")  # Lightning draws the validation bar on the line below the epoch bar
        vstart = time.monotonic()
        for vstep in range(1, 4):
            model.step(args.step_time / 4)
            bar_write(tqdm_frame("Validation DataLoader 0", vstep, 3, time.monotonic() - vstart))
        sys.stderr.write("\n")
    print(f"`Trainer.fit` stopped: `max_epochs={args.epochs}` reached.", flush=True)


if __name__ == "__main__":
    main()

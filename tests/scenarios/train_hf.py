"""Prints what a transformers Trainer prints: a tqdm bar on stderr, log dicts on stdout, eval dicts,
checkpoint saving lines and the final train_runtime dict. Use --v5 for v5's quoted values."""

import os, sys, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, bar_write, parse_args, tqdm_frame  # noqa: E402


def fmt(value, v5):
    return f"'{value:.4g}'" if v5 else repr(float(f"{value:.4g}"))


def main() -> None:
    def extra(p):
        p.add_argument("--v5", action="store_true")
        p.add_argument("--eval-every", type=int, default=5)
        p.add_argument("--out", default="hf_out")
    args = parse_args(__doc__, steps=20, step_time=0.2, extra=extra)
    model = TinyModel()
    start = time.monotonic()
    lr = 5e-5
    for step in range(1, args.steps + 1):
        loss = model.step(args.step_time)
        bar_write(tqdm_frame("", step, args.steps, time.monotonic() - start))
        epoch = step / args.steps
        print("{'loss': %s, 'grad_norm': %s, 'learning_rate': %s, 'epoch': %s}"
              % (fmt(loss, args.v5), fmt(1.5, args.v5), fmt(lr * (1 - epoch), args.v5), fmt(epoch, args.v5)),
              flush=True)
        if step % args.eval_every == 0:
            eval_loss = model.step(args.step_time / 2)
            print("{'eval_loss': %s, 'eval_runtime': %s, 'epoch': %s}"
                  % (fmt(eval_loss, args.v5), fmt(args.step_time / 2, args.v5), fmt(epoch, args.v5)), flush=True)
            path = os.path.join(args.out, f"checkpoint-{step}")
            sys.stderr.write(f"\nSaving model checkpoint to {path}\n")
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "weights.txt"), "w") as f:
                f.write(" ".join(f"{w:.6f}" for w in model.w))
    sys.stderr.write("\n")
    runtime = time.monotonic() - start
    print("{'train_runtime': %s, 'train_samples_per_second': %s, 'train_loss': %s, 'epoch': %s}"
          % (fmt(runtime, args.v5), fmt(args.steps / runtime, args.v5), fmt(loss, args.v5), fmt(1.0, args.v5)),
          flush=True)


if __name__ == "__main__":
    main()

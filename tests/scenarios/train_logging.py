"""A training loop that reports through the logging module (flushed per record)."""

import logging, os, sys, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, parse_args  # noqa: E402


def main() -> None:
    args = parse_args(__doc__, steps=20, step_time=0.2)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    log = logging.getLogger("trainer")
    log.info("starting training for %d steps", args.steps)
    model = TinyModel()
    for step in range(1, args.steps + 1):
        t0 = time.monotonic()
        loss = model.step(args.step_time)
        samples = 64 / max(1e-6, time.monotonic() - t0)
        log.info("epoch 1 step %d/%d loss=%.4f %.1f samples/s", step, args.steps, loss, samples)
    log.info("training complete")


if __name__ == "__main__":
    main()

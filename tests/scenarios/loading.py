"""Writes shard files, then really reads them back behind a "Loading checkpoint shards" bar
(transformers' format), then trains a few steps. --step-time is the time spent per shard."""

import os, sys, tempfile, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import TinyModel, bar_write, parse_args, tqdm_frame  # noqa: E402


def main() -> None:
    def extra(p):
        p.add_argument("--shards", type=int, default=4)
        p.add_argument("--shard-mb", type=int, default=8)
    args = parse_args(__doc__, steps=5, step_time=1.0, extra=extra)
    with tempfile.TemporaryDirectory(prefix="shards-") as tmp:
        paths = []
        for i in range(args.shards):
            path = os.path.join(tmp, f"model-{i + 1:05d}-of-{args.shards:05d}.safetensors")
            with open(path, "wb") as f:
                f.write(os.urandom(args.shard_mb << 20))
            paths.append(path)
        start = time.monotonic()
        bar_write(tqdm_frame("Loading checkpoint shards", 0, args.shards, 0.0))
        checksum = 0
        for i, path in enumerate(paths, 1):
            t0 = time.monotonic()
            with open(path, "rb") as f:
                while True:
                    block = f.read(1 << 20)
                    if not block:
                        break
                    checksum ^= hash(block)
            # Deserialising takes time too: keep the core busy for the rest of the shard's time.
            TinyModel().step(max(0.0, args.step_time - (time.monotonic() - t0)))
            bar_write(tqdm_frame("Loading checkpoint shards", i, args.shards, time.monotonic() - start))
        sys.stderr.write("\n")
    model = TinyModel()
    for step in range(1, args.steps + 1):
        print(f"step {step}/{args.steps} loss {model.step(0.1):.4f}", flush=True)


if __name__ == "__main__":
    main()

"""Capture real DeepSpeed output on CPU (gloo): engine set-up, step logs, checkpoint save.

    DS_ACCELERATOR=cpu /work/capture-venvs/ds/bin/python scripts/capture_deepspeed.py
Writes tests/data/logs/deepspeed-<version>-train.log.
"""

from __future__ import annotations

import os
import sys
import tempfile

from capture_common import run_to_log, version_of

SCRIPT = r'''
import os, sys, torch, deepspeed
model = torch.nn.Linear(8, 1)
config = {"train_batch_size": 4, "steps_per_print": 1, "wall_clock_breakdown": False,
          "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config,
                                       dist_init_required=True)
for step in range(1, 5):
    x = torch.randn(4, 8)
    loss = engine(x).pow(2).mean()
    engine.backward(loss)
    engine.step()
    print(f"step {step}/4 loss {loss.item():.4f}", flush=True)
engine.save_checkpoint(sys.argv[1])
print("done", flush=True)
'''


def main() -> None:
    version = version_of("deepspeed")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        env = {"DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": "29555", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
               "DS_BUILD_OPS": "0"}
        run_to_log([sys.executable, script, os.path.join(tmp, "ckpt")], f"deepspeed-{version}-train.log",
                   env=env, cwd=tmp, timeout=300)


if __name__ == "__main__":
    main()

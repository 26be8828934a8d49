"""Capture real `accelerate launch` output on CPU: launcher notes, the training prints, and a failure.

    /work/capture-venvs/hf4/bin/python scripts/capture_accelerate.py
Writes tests/data/logs/accelerate-<version>-<case>.log (ok: finishes; raise: the script raises at step 3).
(On a CPU-only machine `--cpu --num_processes 2` still runs one process.)
"""

from __future__ import annotations

import os
import sys
import tempfile

from capture_common import run_to_log, version_of

SCRIPT = r'''
import sys
import torch
from accelerate import Accelerator
from accelerate.logging import get_logger
import logging
logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
log = get_logger(__name__)
acc = Accelerator(cpu=True)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
for step in range(1, 6):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    acc.backward(loss)
    opt.step(); opt.zero_grad()
    log.info(f"step {step}/5 loss={loss.item():.4f}")
    if sys.argv[1] == "raise" and step == 3:
        raise RuntimeError(f"process {acc.process_index} failed on purpose")
acc.wait_for_everyone()
log.info("training done")
'''


def main() -> None:
    version = version_of("accelerate")
    launcher = os.path.join(os.path.dirname(sys.executable), "accelerate")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        for case in ("ok", "raise"):
            run_to_log([launcher, "launch", "--cpu", "--num_processes", "2", "--num_machines", "1",
                        "--main_process_port", "29544", script, case], f"accelerate-{version}-{case}.log",
                       env={"OMP_NUM_THREADS": "1", "HF_HOME": tmp}, cwd=tmp)


if __name__ == "__main__":
    main()

"""Capture real torchrun (torch.distributed.run) failure output with 2 CPU ranks over gloo.

    /work/capture-venvs/hf4/bin/python scripts/capture_torchrun.py
Writes tests/data/logs/torchrun-<torch version>-<case>.log:
  raise   rank 1 raises after a few all_reduce steps -> `[rank1]:` traceback + ChildFailedError block
  sigkill rank 1 SIGKILLs itself -> "Signal 9 (SIGKILL) received", exitcode -9
"""

from __future__ import annotations

import os
import sys
import tempfile

from capture_common import run_to_log, version_of

WORKER = r'''
import os, signal, sys, time
import torch
import torch.distributed as dist

def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(1, 4):
        t = torch.ones(4) * rank
        dist.all_reduce(t)
        print(f"rank {rank} step {step}/10 loss {1.0 / step:.4f}", flush=True)
        time.sleep(0.2)
    if rank == 1:
        if sys.argv[1] == "raise":
            raise ValueError("boom: rank 1 failed on purpose")
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)

main()
'''


def main() -> None:
    version = version_of("torch").split("+")[0]
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(WORKER)
        for case in ("raise", "sigkill"):
            run_to_log([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                        "--master_port=29533", script, case], f"torchrun-{version}-{case}.log",
                       env={"OMP_NUM_THREADS": "1"}, cwd=tmp)


if __name__ == "__main__":
    main()

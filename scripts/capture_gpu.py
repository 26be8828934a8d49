"""Capture GPU-only failures on a real NVIDIA GPU: CUDA OOM, a device-side assert, and (2 GPUs) an
NCCL watchdog timeout, with nvidia-smi samples of the hung ranks (util, power, memory).

    CAPTURE_LOGS_DIR=$OUT python scripts/capture_gpu.py oom cuda-error     # 1 GPU
    CAPTURE_LOGS_DIR=$OUT python scripts/capture_gpu.py nccl-timeout        # 2 GPUs
Writes cuda-<torch version>-oom.log, cuda-<v>-device-assert.log, nccl-<v>-watchdog-timeout.log and
nccl-<v>-watchdog-timeout.smi.csv (nvidia-smi during the hang).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from capture_common import run_to_log, version_of

OOM = r'''
import torch
x = torch.randn(1024, 1024, device="cuda")
print("allocated", x.numel(), flush=True)
huge = torch.empty(400 * 1024**3, dtype=torch.uint8, device="cuda")
'''

ASSERT = r'''
import torch
x = torch.zeros(10, device="cuda")
idx = torch.tensor([20], device="cuda")
print("indexing", flush=True)
y = x[idx]
print(y.sum().item())
'''

NCCL = r'''
import datetime, os, time, torch, torch.distributed as dist
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
torch.cuda.set_device(rank)
t = torch.ones(1 << 20, device="cuda")
for step in range(1, 4):
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print(f"rank {rank} step {step}/100 loss {1.0 / step:.4f}", flush=True)
if rank == 1:
    time.sleep(120)  # stops taking part: rank 0 waits in the next collective
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"rank {rank} done", flush=True)
'''


def main() -> None:
    version = version_of("torch").split("+")[0]
    cases = sys.argv[1:] or ["oom", "cuda-error"]
    with tempfile.TemporaryDirectory() as tmp:
        def script(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path
        if "oom" in cases:
            run_to_log([sys.executable, script("train.py", OOM)], f"cuda-{version}-oom.log", cwd=tmp)
        if "cuda-error" in cases:
            run_to_log([sys.executable, script("train.py", ASSERT)], f"cuda-{version}-device-assert.log", cwd=tmp)
        if "nccl-timeout" in cases:
            out_dir = os.environ.get("CAPTURE_LOGS_DIR", ".")
            smi_path = os.path.join(out_dir, f"nccl-{version}-watchdog-timeout.smi.csv")
            with open(smi_path, "w") as smi_out:
                smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,index,utilization.gpu,power.draw,"
                                        "power.limit,memory.used,clocks.sm", "--format=csv", "-lms", "1000"],
                                       stdout=smi_out, stderr=subprocess.STDOUT)
                try:
                    run_to_log([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                                script("train.py", NCCL)], f"nccl-{version}-watchdog-timeout.log", cwd=tmp,
                               timeout=300)
                finally:
                    smi.terminate()
                    smi.wait()


if __name__ == "__main__":
    main()

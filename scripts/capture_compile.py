"""Capture real torch.compile logging on CPU: dynamo + inductor logs, and max-autotune.

    /work/capture-venvs/hf4/bin/python scripts/capture_compile.py
Writes tests/data/logs/torch-compile-<torch version>-<case>.log:
  logs      TORCH_LOGS=dynamo,inductor, default mode
  autotune  TORCH_LOGS=dynamo,inductor, mode=max-autotune-no-cudagraphs
  recompile TORCH_LOGS=recompiles, a shape change forces a recompile
"""

from __future__ import annotations

import sys
import tempfile

from capture_common import run_to_log, version_of


def child(mode: str) -> None:
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kwargs = {"mode": "max-autotune-no-cudagraphs"} if mode == "autotune" else {}
    if mode == "recompile":
        kwargs = {"dynamic": False}
    step_fn = torch.compile(model, **kwargs)
    for step in range(1, 4):
        batch = 16 if mode != "recompile" or step < 3 else 24
        x = torch.randn(batch, 64)
        loss = step_fn(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print({"loss": round(loss.item(), 4), "step": step})


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    version = version_of("torch").split("+")[0]
    logs = {"logs": "dynamo,inductor", "autotune": "dynamo,inductor", "recompile": "recompiles"}
    for case, torch_logs in logs.items():
        with tempfile.TemporaryDirectory() as cache:
            run_to_log([sys.executable, __file__, "--child", case], f"torch-compile-{version}-{case}.log",
                       env={"TORCH_LOGS": torch_logs, "TORCHINDUCTOR_CACHE_DIR": cache, "OMP_NUM_THREADS": "2"})


if __name__ == "__main__":
    main()

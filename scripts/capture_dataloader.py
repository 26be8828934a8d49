"""Capture the real error when a DataLoader worker dies (SIGKILL, as the OOM killer does).

    /work/capture-venvs/hf4/bin/python scripts/capture_dataloader.py
Writes tests/data/logs/dataloader-<torch version>-worker-killed.log.
"""

from __future__ import annotations

import sys

from capture_common import run_to_log, version_of


def child() -> None:
    import os
    import signal
    import torch

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            info = torch.utils.data.get_worker_info()
            if i == 40 and info is not None:
                os.kill(os.getpid(), signal.SIGKILL)
            return torch.tensor([i], dtype=torch.float32)

    loader = torch.utils.data.DataLoader(Data(), batch_size=4, num_workers=2)
    for step, batch in enumerate(loader):
        print(f"step {step} batch {batch.sum().item():.0f}", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return
    version = version_of("torch").split("+")[0]
    run_to_log([sys.executable, __file__, "--child"], f"dataloader-{version}-worker-killed.log")


if __name__ == "__main__":
    main()

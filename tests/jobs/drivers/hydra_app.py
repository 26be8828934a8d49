"""A Hydra app as people write them: `python hydra_app.py -m lr=0.1,0.2` sweeps with Hydra's basic
launcher, which runs each job in this very process, one after another. Each run trains in-process
(torch) for `steps` steps."""
import time
from dataclasses import dataclass

import hydra
from hydra.core.config_store import ConfigStore


@dataclass
class Config:
    lr: float = 0.1
    steps: int = 10


ConfigStore.instance().store(name="config", node=Config)


@hydra.main(version_base=None, config_name="config")
def main(cfg: Config) -> None:
    import torch

    w = torch.zeros(4)
    print(f"run lr={cfg.lr}", flush=True)
    for step in range(1, cfg.steps + 1):
        w += cfg.lr
        print(f"step {step} lr {cfg.lr}", flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    main()

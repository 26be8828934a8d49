"""Capture real Lightning output to a file, with its tqdm bar and with its rich bar.

    /work/capture-venvs/pl/bin/python scripts/capture_lightning.py    # lightning + rich + torch==2.13.0
Writes tests/data/logs/lightning-<version>-tqdm.log and lightning-<version>-rich.log.
"""

from __future__ import annotations

import sys
import tempfile

from capture_common import run_to_log, version_of


def child(bar: str, root: str) -> None:
    import torch
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint, RichProgressBar, TQDMProgressBar

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), prog_bar=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = lambda: torch.utils.data.DataLoader(data, batch_size=8, num_workers=0)
    progress = TQDMProgressBar(refresh_rate=1) if bar == "tqdm" else RichProgressBar(refresh_rate=1)
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, default_root_dir=root,
                        callbacks=[progress, ModelCheckpoint(dirpath=root + "/ckpt")], log_every_n_steps=1,
                        enable_model_summary=True)
    trainer.fit(Model(), loader(), loader())


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    version = version_of("lightning")
    for bar in ("tqdm", "rich"):
        with tempfile.TemporaryDirectory() as root:
            run_to_log([sys.executable, __file__, "--child", bar, root], f"lightning-{version}-{bar}.log",
                       env={"OMP_NUM_THREADS": "1"})


if __name__ == "__main__":
    main()

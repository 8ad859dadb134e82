"""Trains LitRegressor in half precision with Lightning's fp16 AMP plugin and its GradScaler.

(On a CUDA machine `precision="16-mixed"` picks this plugin; Lightning replaces it with bf16 on the
CPU, so the CPU run names it: the same plugin, with a GradScaler for the CPU device.)"""
import lightning as L
import torch
from lightning.pytorch.plugins import MixedPrecision
from torch.utils.data import DataLoader, TensorDataset

from model import LitRegressor


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    x = torch.randn(64, 16)
    data = TensorDataset(x, x.sum(dim=1))
    model = LitRegressor().half()           # halve the memory of the weights
    trainer = L.Trainer(max_steps=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()],
                        plugins=[MixedPrecision("16-mixed", "cpu")])
    trainer.fit(model, DataLoader(data, batch_size=8))

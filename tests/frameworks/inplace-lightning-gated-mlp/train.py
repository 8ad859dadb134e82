"""Trains GatedRegressor with Lightning's Trainer.fit on synthetic data (CPU, offline)."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import GatedRegressor


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    x = torch.randn(96, 8)
    y = x[:, :1] * 2 - x[:, 1:2]
    train, val = TensorDataset(x[:64], y[:64]), TensorDataset(x[64:], y[64:])
    trainer = L.Trainer(max_steps=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=2, callbacks=[PrintLoss()])
    trainer.fit(GatedRegressor(), DataLoader(train, batch_size=8), DataLoader(val, batch_size=16))

"""Trains LitRegressor with Lightning's Trainer.fit on synthetic data (CPU, offline)."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset
import numpy as np
from model import LitRegressor


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 16))
    targets = features.sum(axis=1).astype(np.float32)
    data = TensorDataset(torch.from_numpy(features), torch.from_numpy(targets))
    trainer = L.Trainer(max_steps=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()])
    trainer.fit(LitRegressor(), DataLoader(data, batch_size=8))

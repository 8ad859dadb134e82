"""Trains LitClassifier with Lightning's Trainer.fit on synthetic data (CPU, offline)."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset
import numpy as np
from model import LitClassifier


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    data = TensorDataset(torch.randn(64, 16), torch.from_numpy(np.random.randint(0, 4, size=64).astype(np.int32)))
    trainer = L.Trainer(max_steps=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()])
    trainer.fit(LitClassifier(), DataLoader(data, batch_size=8))

"""Trains LitCNN with Lightning's Trainer.fit on synthetic data (CPU, offline)."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import LitCNN


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    data = TensorDataset(torch.randn(64, 1, 16, 16), torch.randint(0, 4, (64,)))
    trainer = L.Trainer(max_steps=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()])
    trainer.fit(LitCNN(), DataLoader(data, batch_size=8))

"""Trains Classifier with Lightning's Trainer.fit on synthetic 3-class data (CPU, offline)."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Classifier

if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    x = torch.randn(64, 10)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Classifier(), DataLoader(TensorDataset(x, y), batch_size=16))

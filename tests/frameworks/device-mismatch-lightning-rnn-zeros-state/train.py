"""Trains LitElman with Lightning's Trainer.fit on random sequences, on the GPU when there is one."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import LitElman


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    x = torch.randn(64, 6, 8)
    data = TensorDataset(x, x.sum(dim=(1, 2)))
    trainer = L.Trainer(max_steps=5, accelerator="auto", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()])
    trainer.fit(LitElman(), DataLoader(data, batch_size=8))

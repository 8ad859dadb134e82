"""Trains CharGRU with Lightning's Trainer.fit on a synthetic token stream, in order (CPU, offline)."""
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import CharGRU


class PrintLoss(L.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        print(f"step {trainer.global_step} loss {float(outputs['loss']):.4f}")


if __name__ == "__main__":
    L.seed_everything(0, verbose=False)
    stream = torch.randint(0, 16, (4, 201))
    x = torch.stack([stream[:, i:i + 20] for i in range(0, 180, 20)], 1).flatten(0, 1)
    y = torch.stack([stream[:, i + 1:i + 21] for i in range(0, 180, 20)], 1).flatten(0, 1)
    trainer = L.Trainer(max_steps=5, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()])
    trainer.fit(CharGRU(), DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True))

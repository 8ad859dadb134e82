"""Trains LitRegressor with its weights in bfloat16 under Lightning's 16-mixed AMP plugin, whose
GradScaler unscales the gradients (on a GPU; see expected.toml for the CPU)."""
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
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(64, 16)
    data = TensorDataset(x, x.sum(dim=1))
    model = LitRegressor().to(torch.bfloat16)     # bf16 weights: half the memory
    trainer = L.Trainer(max_steps=5, accelerator=device, devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[PrintLoss()],
                        plugins=[MixedPrecision("16-mixed", device)])
    trainer.fit(model, DataLoader(data, batch_size=8))

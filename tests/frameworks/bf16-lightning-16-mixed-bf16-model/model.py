"""A small MLP regressor."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitRegressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.net(x.to(self.dtype)).squeeze(-1).float(), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

"""A gated MLP regressor as a LightningModule."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class GatedRegressor(L.LightningModule):
    def __init__(self, width=32, lr=1e-2):
        super().__init__()
        self.lr = lr
        self.inp = nn.Linear(8, width)
        self.gate = nn.Parameter(torch.ones(width))
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        h = torch.sigmoid(self.inp(x))
        h *= self.gate                      # scale each unit by its learned gate
        return self.out(h)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)

"""A small autoencoder LightningModule."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitAutoEncoder(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.encoder = nn.Sequential(nn.Linear(16, 8), nn.ReLU())
        self.decoder = nn.Linear(8, 16)

    def forward(self, x):
        return self.decoder(self.encoder(x))

    def training_step(self, batch, batch_idx):
        (x,) = batch
        loss = F.mse_loss(self(x), x, reduction="none")
        self.log("train_loss", loss.mean(), prog_bar=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

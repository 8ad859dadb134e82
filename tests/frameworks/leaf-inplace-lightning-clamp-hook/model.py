"""An MLP with a learned output temperature kept in [0.1, 10] after every batch."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitTempered(L.LightningModule):
    def __init__(self, num_classes=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, num_classes))
        self.temperature = nn.Parameter(torch.ones(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x) / self.temperature, y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.temperature.clamp_(0.1, 10.0)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)

"""A linear classifier over 16 features."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitClassifier(L.LightningModule):
    def __init__(self, num_classes=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, num_classes))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

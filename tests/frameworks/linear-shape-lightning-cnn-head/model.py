"""A small CNN classifier for 1x16x16 images."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitCNN(L.LightningModule):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8 * 16 * 16, num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv(x)))
        return self.head(torch.flatten(x, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

"""A small classifier LightningModule that keeps a per-epoch loss history."""
import lightning as L
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(L.LightningModule):
    def __init__(self, lr=1e-2):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
        self.step_losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.step_losses.append(loss)
        return loss

    def on_train_epoch_end(self):
        history = np.array([l.numpy() for l in self.step_losses])
        print(f"epoch {self.current_epoch} mean loss {history.mean():.4f}")
        self.step_losses.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

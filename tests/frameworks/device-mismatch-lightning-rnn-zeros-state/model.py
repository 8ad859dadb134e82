"""An Elman RNN regressor over short sequences, unrolled by hand."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitElman(L.LightningModule):
    def __init__(self, features=8, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.inp = nn.Linear(features, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.hidden)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
        return self.head(h).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)

"""Shared encoder with a classification and a regression head."""
import torch.nn as nn


class MultiHead(nn.Module):
    def __init__(self, in_dim, hidden, n_classes):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.cls_head = nn.Linear(hidden, n_classes)
        self.reg_head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.encoder(x)
        return self.cls_head(h), self.reg_head(h).squeeze(-1)

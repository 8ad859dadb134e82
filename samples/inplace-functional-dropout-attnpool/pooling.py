"""Sequence pooling layers."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionPool(nn.Module):
    """Weighted average over time steps; weights from a learned scorer."""

    def __init__(self, dim, attn_dropout=0.1):
        super().__init__()
        self.score = nn.Linear(dim, 1)
        self.attn_dropout = attn_dropout

    def forward(self, x):
        w = torch.softmax(self.score(x).squeeze(-1), dim=1)
        w = F.dropout(w, p=self.attn_dropout, training=self.training, inplace=True)
        return torch.einsum("bt,btd->bd", w, x)


class MeanPool(nn.Module):
    def forward(self, x):
        return x.mean(dim=1)

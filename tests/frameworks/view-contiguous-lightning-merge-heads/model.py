"""A one-layer multi-head self-attention classifier over 6-token sequences."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitAttention(L.LightningModule):
    def __init__(self, dim=16, heads=4, num_classes=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.softmax(q @ k.transpose(-2, -1) / (c // self.heads) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).view(b, t, c)
        return self.head(self.proj(y).mean(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)

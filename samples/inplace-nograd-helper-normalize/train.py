"""Contrastive (InfoNCE) training of a small embedding model on two noisy views."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from metrics import accuracy, mean_cosine

TEMPERATURE = 0.2


class Embedder(nn.Module):
    def __init__(self, in_dim=24, dim=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.proj = nn.Linear(64, dim)

    def forward(self, x):
        return self.proj(self.backbone(x))


def info_nce(za, zb):
    logits = F.normalize(za, dim=1) @ F.normalize(zb, dim=1).T / TEMPERATURE
    labels = torch.arange(za.shape[0])
    return F.cross_entropy(logits, labels), logits, labels


torch.manual_seed(0)
data = torch.randn(64, 24)
model = Embedder()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(5):
    za = model(data + 0.1 * torch.randn_like(data))
    zb = model(data + 0.1 * torch.randn_like(data))
    loss, logits, labels = info_nce(za, zb)
    collapse = mean_cosine(za)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f} acc {accuracy(logits, labels):.2f} cos {collapse:.3f}")

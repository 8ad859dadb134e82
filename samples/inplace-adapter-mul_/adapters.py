"""Bottleneck adapter (Houlsby-style) for parameter-efficient fine-tuning."""
import torch
import torch.nn as nn


class Adapter(nn.Module):
    def __init__(self, dim, bottleneck=8, scale=0.5):
        super().__init__()
        self.down = nn.Linear(dim, bottleneck)
        self.up = nn.Linear(bottleneck, dim)
        self.scale = scale
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x):
        h = torch.tanh(self.down(x))
        h.mul_(self.scale)  # damp the adapter at the start of fine-tuning
        return x + self.up(h)


class AdaptedLayer(nn.Module):
    """Wrap a frozen pretrained layer and add a trainable adapter after it."""

    def __init__(self, base: nn.Module, dim: int):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.adapter = Adapter(dim)

    def forward(self, x):
        return self.adapter(self.base(x))

"""Residual MLP used for the tabular classifier."""
import torch.nn as nn


class ResidualBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x):
        out = self.act(self.norm(self.fc1(x)))
        out += x  # skip connection
        return self.fc2(out)


class ResMLP(nn.Module):
    def __init__(self, d_in, dim=64, depth=2, num_classes=4):
        super().__init__()
        self.stem = nn.Linear(d_in, dim)
        self.blocks = nn.Sequential(*[ResidualBlock(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))

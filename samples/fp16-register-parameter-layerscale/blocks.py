"""Residual MLP blocks with LayerScale (Touvron et al., 2021)."""
import torch
import torch.nn as nn


class LayerScale(nn.Module):
    def __init__(self, dim, init_value=1e-2):
        super().__init__()
        gamma = torch.full((dim,), init_value, dtype=torch.float16)
        self.register_parameter("gamma", nn.Parameter(gamma))

    def forward(self, x):
        return x * self.gamma


class ResidualMLP(nn.Module):
    def __init__(self, dim, expansion=2):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * expansion)
        self.fc2 = nn.Linear(dim * expansion, dim)
        self.scale = LayerScale(dim)

    def forward(self, x):
        return x + self.scale(self.fc2(torch.relu(self.fc1(x))))

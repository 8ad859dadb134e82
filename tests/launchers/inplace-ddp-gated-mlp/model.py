"""A gated MLP regressor: a sigmoid gate, scaled to (0, 2), multiplies the hidden features."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GatedMLP(nn.Module):
    def __init__(self, features=8, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.gate = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, x):
        g = torch.sigmoid(self.gate(x))
        g.mul_(2.0)
        return self.fc2(F.relu(self.fc1(x)) * g)

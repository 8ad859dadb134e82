"""A two-layer MLP classifier."""
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, in_dim, hidden, classes):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        return self.fc2(h)

"""Fraud-style imbalanced classifier on synthetic transactions."""
import torch
import torch.nn as nn

from losses import WeightedLoss


class Scorer(nn.Module):
    def __init__(self, n_features=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, 32), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Linear(32, 2),
        )

    def forward(self, x):
        return self.net(x)


def make_data(n=256, pos_rate=0.1):
    x = torch.randn(n, 16)
    y = (torch.rand(n) < pos_rate).long()
    x[y == 1] += 0.8
    return x, y


torch.manual_seed(0)
x, y = make_data()
model = Scorer()
criterion = WeightedLoss(torch.bincount(y, minlength=2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step in range(5):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

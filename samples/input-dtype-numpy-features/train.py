"""Tabular classifier on numpy features."""
import torch
import torch.nn as nn

from data import make_features, make_loader
from model import MLP

torch.manual_seed(0)
features, labels = make_features(96, seed=0)
loader = make_loader(features, labels)
model = MLP(8, 32, 2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step, (xb, yb) in enumerate(loader):
    if step == 5:
        break
    optimizer.zero_grad()
    loss = criterion(model(xb), yb)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

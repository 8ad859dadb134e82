"""Two-class classifier; the device comes from config.py."""
import torch
import torch.nn as nn

import config

torch.manual_seed(0)
X = torch.randn(80, 4)
y = (X[:, 0] * X[:, 1] > 0).long()
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
model = model.to(config.DEVICE)
optimizer = torch.optim.Adam(model.parameters(), lr=config.LR)

for step in range(5):
    batch = slice(step * config.BATCH_SIZE, (step + 1) * config.BATCH_SIZE)
    xb, yb = X[batch].to(config.DEVICE), y[batch].to(config.DEVICE)
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

"""Sequence regression on the GPU when there is one."""
import os

import torch
import torch.nn as nn

from model import ElmanRegressor

device = os.environ.get("SAMPLE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
seqs = torch.randn(64, 10, 3)
targets = seqs[:, :, 0].sum(dim=1, keepdim=True)
model = ElmanRegressor(3, 16).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step in range(5):
    batch = slice(step * 12, step * 12 + 12)
    xb, yb = seqs[batch].to(device), targets[batch].to(device)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(xb), yb)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

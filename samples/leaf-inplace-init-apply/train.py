"""Binary classifier on synthetic features, with a custom weight initialisation."""
import torch
import torch.nn as nn

from model import MLP

torch.manual_seed(0)
X = torch.randn(64, 10)
y = (X[:, :3].sum(dim=1, keepdim=True) > 0).float()
model = MLP()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.BCEWithLogitsLoss()

for step in range(5):
    optimizer.zero_grad()
    loss = criterion(model(X), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

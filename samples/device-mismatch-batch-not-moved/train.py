"""Classifier trained on the GPU when there is one; the batches are never moved to it."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from model import Classifier

device = os.environ.get("SAMPLE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
X = torch.randn(96, 6)
y = (X[:, 0] - X[:, 1] > 0).long()
train_loader = DataLoader(TensorDataset(X[:64], y[:64]), batch_size=16)
val_loader = DataLoader(TensorDataset(X[64:], y[64:]), batch_size=16)
model = Classifier(6, 2).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for step, (xb, yb) in enumerate(train_loader):
    optimizer.zero_grad()
    out = model(xb)
    loss = criterion(out, yb.to(device))
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    correct = sum((model(xb).argmax(1).cpu() == yb).sum().item() for xb, yb in val_loader)
print(f"val acc {correct / 32:.2f}")

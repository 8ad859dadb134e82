"""Binary classifier MLP with a validation AUC after training."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from evaluate import validate

torch.manual_seed(0)
X = torch.randn(96, 8)
y = (X[:, :2].sum(dim=1) > 0).long()
train = DataLoader(TensorDataset(X[:64], y[:64].float()), batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(X[64:], y[64:]), batch_size=16)

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step, (xb, yb) in enumerate(train):
    optimizer.zero_grad()
    loss = criterion(model(xb).squeeze(1), yb)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
print(f"validation auc {validate(model, val):.3f}")

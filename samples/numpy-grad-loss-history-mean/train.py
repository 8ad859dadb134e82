"""Logistic regression on synthetic features; the epoch summary averages the step losses."""
import torch
import torch.nn as nn

from metrics import summarize

torch.manual_seed(0)
X = torch.randn(80, 6)
y = (X[:, 0] - X[:, 1] > 0).float()
model = nn.Linear(6, 1)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

losses = []
for step in range(5):
    batch = slice(step * 16, step * 16 + 16)
    optimizer.zero_grad()
    loss = criterion(model(X[batch]).squeeze(1), y[batch])
    loss.backward()
    optimizer.step()
    losses.append(loss)
    print(f"step {step} loss {loss.item():.4f}")

mean, spread = summarize(losses)
print(f"epoch loss {mean:.4f} +- {spread:.4f}")

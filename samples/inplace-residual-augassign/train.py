"""Train a residual MLP classifier on synthetic features."""
import torch
import torch.nn as nn

from models import ResMLP

torch.manual_seed(0)

features = torch.randn(160, 20)
labels = (features[:, :4].argmax(dim=1))  # 4 classes, learnable rule

model = ResMLP(d_in=20)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
loader = list(zip(features.split(32), labels.split(32)))

for step, (xb, yb) in enumerate(loader):
    optimizer.zero_grad()
    logits = model(xb)
    loss = criterion(logits, yb)
    loss.backward()
    optimizer.step()
    acc = (logits.argmax(1) == yb).float().mean()
    print(f"step {step} loss {loss.item():.4f} acc {acc.item():.2f}")

"""MLP on augmented 1-D signals."""
import torch
import torch.nn as nn

from augment import augment

torch.manual_seed(0)
signals = torch.randn(80, 16)
targets = signals.abs().mean(dim=1, keepdim=True)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step in range(5):
    batch = slice(step * 16, step * 16 + 16)
    # the augmentation needs no gradients
    with torch.no_grad():
        x = augment(signals[batch])
        pred = model(x)
        loss = criterion(pred, targets[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

"""Regression MLP with EMA weights; reports the EMA model's validation loss every step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ema import EMA


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x[:, :2].prod(dim=1) + 0.1 * x[:, 2]).unsqueeze(1)


@torch.no_grad()
def ema_val_loss(model, ema, x, y):
    with ema.average_parameters():
        return F.mse_loss(model(x), y).item()


torch.manual_seed(0)
train_x, train_y = make_split(256, 1)
val_x, val_y = make_split(64, 2)
model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
ema = EMA(model.parameters(), decay=0.9)

for step in range(5):
    loss = F.mse_loss(model(train_x), train_y)
    val = ema_val_loss(model, ema, val_x, val_y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ema.update()
    print(f"step {step} loss {loss.item():.4f} ema_val {val:.4f}")

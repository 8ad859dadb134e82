"""A one-block sequence regressor with self-attention."""
import torch
import torch.nn as nn

from attention import SelfAttention

torch.manual_seed(0)
model = nn.Sequential(SelfAttention(16, 4), nn.Flatten(), nn.Linear(8 * 16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(32, 8, 16)
y = x.mean(dim=(1, 2)).unsqueeze(1)

for step in range(5):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

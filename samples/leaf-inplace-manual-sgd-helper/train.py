"""Polynomial regression trained with a hand-written SGD step."""
import torch

from optim_utils import sgd_step

torch.manual_seed(0)
x = torch.linspace(-1, 1, 64).unsqueeze(1)
y = 0.5 * x ** 3 - x + 0.1 * torch.randn_like(x)
features = torch.cat([x, x ** 2, x ** 3], dim=1)
w = torch.zeros(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
buffers = [torch.zeros_like(w), torch.zeros_like(b)]

for step in range(5):
    loss = ((features @ w + b - y) ** 2).mean()
    loss.backward()
    sgd_step([w, b], buffers, lr=0.1)
    print(f"step {step} loss {loss.item():.4f}")

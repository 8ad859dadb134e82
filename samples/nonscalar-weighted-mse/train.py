"""Regression MLP on synthetic tabular data with per-sample importance weights."""
import torch
import torch.nn as nn

torch.manual_seed(0)

# --- data: 64 rows, 10 features, noisy linear target -------------------------
X = torch.randn(64, 10)
true_w = torch.randn(10, 1)
y = X @ true_w + 0.1 * torch.randn(64, 1)
weights = torch.rand(64, 1) + 0.5  # recent rows matter more in the real dataset


class Regressor(nn.Module):
    def __init__(self, d_in, hidden=32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


model = Regressor(10)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

for epoch in range(5):
    opt.zero_grad()
    pred = model(X)
    # importance-weighted squared error
    loss = weights * (pred - y) ** 2
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

"""One-layer LSTM forecaster on sine windows."""
import torch
import torch.nn as nn

from series import sine_windows


class Forecaster(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


torch.manual_seed(0)
inputs, targets = sine_windows(200, window=16, seed=0)
model = Forecaster(32)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step in range(5):
    batch = slice(step * 32, step * 32 + 32)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs[batch]), targets[batch])
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

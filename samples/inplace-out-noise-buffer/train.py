"""MLP regressor regularised with multiplicative Gaussian noise."""
import torch
import torch.nn as nn

from layers import GaussianNoise

BATCH, IN, HIDDEN = 64, 8, 32


class NoisyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, 1)
        self.noise = GaussianNoise((BATCH, HIDDEN), sigma=0.2)

    def forward(self, x):
        h = self.noise(torch.relu(self.fc1(x)))
        h = self.noise(torch.relu(self.fc2(h)))
        return self.fc3(h)


torch.manual_seed(0)
X = torch.randn(BATCH, IN)
Y = X.pow(2).sum(dim=1, keepdim=True)

model = NoisyMLP()
optim = torch.optim.RMSprop(model.parameters(), lr=1e-3)
loss_fn = nn.MSELoss()

for step in range(5):
    optim.zero_grad()
    loss = loss_fn(model(X), Y)
    loss.backward()
    optim.step()
    print(f"step {step} loss {loss.item():.4f}")

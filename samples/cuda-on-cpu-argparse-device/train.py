"""MLP regression from a tutorial written for a GPU machine."""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda", help="where to train")
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

torch.manual_seed(0)
X = torch.randn(64, 3)
y = X.sum(dim=1, keepdim=True)
model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1)).to(args.device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
X, y = X.to(args.device), y.to(args.device)

for step in range(args.steps):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(X), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

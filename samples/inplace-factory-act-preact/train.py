"""Tabular classifier: a stack of pre-activation residual blocks."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from layers import PreActBlock

N_FEATURES, N_CLASSES = 20, 3


class ResMLP(nn.Module):
    def __init__(self, widths=(64, 64, 32)):
        super().__init__()
        self.stem = nn.Linear(N_FEATURES, widths[0])
        self.blocks = nn.Sequential(*[PreActBlock(a, b) for a, b in zip(widths, widths[1:])])
        self.head = nn.Linear(widths[-1], N_CLASSES)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def main():
    torch.manual_seed(0)
    x = torch.randn(128, N_FEATURES)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()

    model = ResMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(5):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()

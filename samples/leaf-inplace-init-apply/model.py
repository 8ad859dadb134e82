"""An MLP with the DCGAN-style weight initialisation."""
import torch.nn as nn


def init_weights(m):
    if isinstance(m, nn.Linear):
        m.weight.normal_(0.0, 0.02)
        m.bias.zero_()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
        self.apply(init_weights)

    def forward(self, x):
        return self.net(x)

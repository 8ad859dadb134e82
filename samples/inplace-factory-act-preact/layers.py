"""Building blocks shared by the tabular models."""
import torch.nn as nn


def make_act():
    return nn.ReLU(inplace=True)


class PreActBlock(nn.Module):
    """Pre-activation residual block with a projection shortcut."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.shortcut = nn.Linear(d_in, d_out)
        self.fc1 = nn.Linear(d_in, d_out)
        self.fc2 = nn.Linear(d_out, d_out)
        self.act = make_act()

    def forward(self, x):
        identity = self.shortcut(x)
        out = self.fc1(self.act(x))
        out = self.fc2(self.act(out))
        return out + identity

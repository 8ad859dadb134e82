"""An Elman RNN written by hand, regressing one value from a sequence."""
import torch
import torch.nn as nn


class ElmanRegressor(nn.Module):
    def __init__(self, in_dim, hidden):
        super().__init__()
        self.hidden = hidden
        self.inp = nn.Linear(in_dim, hidden)
        self.rec = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.hidden)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
        return self.out(h)

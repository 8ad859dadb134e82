"""An MLP assembled from a layer spec, trained on a toy 5-class problem."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from layers import build_layer

SPEC = [
    ("linear", 64), ("relu",),
    ("linear", 64), ("relu",), ("scale", 0.5),
    ("linear", 5),
]


class SpecNet(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.blocks = nn.ModuleList(build_layer(*s) for s in spec)

    def forward(self, x):
        h = x
        for blk in self.blocks:
            h = blk(h)
        return h


torch.manual_seed(0)
inputs = torch.randn(80, 12)
targets = inputs[:, :5].argmax(dim=1)
net = SpecNet(SPEC)
net(inputs[:1])  # materialise the lazy layers
opt = torch.optim.Adam(net.parameters(), lr=1e-3)

for step in range(5):
    loss = F.cross_entropy(net(inputs), targets)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")

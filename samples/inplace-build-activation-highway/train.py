"""Highway network for tabular regression, configured by a dataclass."""
from dataclasses import dataclass

import torch
import torch.nn as nn

from registry import build_activation, build_norm


@dataclass
class Config:
    in_dim: int = 10
    hidden: int = 32
    depth: int = 2
    activation: str = "elu"
    norm: str = "layer"
    lr: float = 1e-3


class HighwayLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.gate = nn.Linear(cfg.hidden, cfg.hidden)
        self.act = build_activation(cfg)
        self.norm = build_norm(cfg, cfg.hidden)

    def forward(self, x):
        h = self.proj(self.norm(x))
        t = torch.sigmoid(self.gate(h))
        return t * self.act(h) + (1 - t) * x


class HighwayNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.inp = nn.Linear(cfg.in_dim, cfg.hidden)
        self.layers = nn.ModuleList(HighwayLayer(cfg) for _ in range(cfg.depth))
        self.out = nn.Linear(cfg.hidden, 1)

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h).squeeze(-1)


def train(cfg):
    torch.manual_seed(0)
    x = torch.randn(256, cfg.in_dim)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    model = HighwayNet(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    for step in range(5):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    train(Config())

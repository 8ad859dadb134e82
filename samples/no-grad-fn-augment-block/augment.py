"""Random flips and noise for 1-D signals (no parameters: nothing to train)."""
import torch


def augment(x, noise=0.05):
    flip = torch.rand(x.size(0), 1) < 0.5
    x = torch.where(flip, x.flip(1), x)
    return x + noise * torch.randn_like(x)

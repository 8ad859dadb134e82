"""Layers that can be listed in a model spec."""
import torch.nn as nn


class Scale(nn.Module):
    """Multiply activations by a fixed factor (keeps deep stacks well-conditioned)."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x.mul_(self.factor)

    def extra_repr(self):
        return f"factor={self.factor}"


def build_layer(kind, *args):
    if kind == "linear":
        return nn.LazyLinear(*args)
    if kind == "relu":
        return nn.ReLU()
    if kind == "scale":
        return Scale(*args)
    raise ValueError(f"unknown layer kind {kind!r}")

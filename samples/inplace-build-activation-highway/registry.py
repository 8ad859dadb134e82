"""Look up layers by the names used in the experiment configs."""
import torch.nn as nn

ACTIVATIONS = {
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "leaky_relu": nn.LeakyReLU,
}


def build_activation(cfg):
    return ACTIVATIONS[cfg.activation](inplace=True)


def build_norm(cfg, dim):
    return nn.LayerNorm(dim) if cfg.norm == "layer" else nn.Identity()

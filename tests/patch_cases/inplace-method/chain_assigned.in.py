import torch


def reparameterize(mu, logvar):
    std = logvar.mul(0.5).exp()
    z = std.mul_(torch.randn_like(std)).add_(mu)  # FIX: inplace-method
    return z, std

import torch


def reparameterize(mu, logvar):
    std = logvar.mul(0.5).exp()
    z = std = std.mul(torch.randn_like(std)).add(mu)  # FIX: inplace-method
    return z, std

"""Helpers for WGAN training (Arjovsky et al., 2017)."""
import torch


@torch.no_grad()
def clip_weights(module, c):
    """Enforce the Lipschitz constraint by clipping every weight to [-c, c]."""
    for p in module.parameters():
        p.clamp_(-c, c)


def sample_noise(n, dim):
    return torch.randn(n, dim)

"""Regularisation layers."""
import torch
import torch.nn as nn


class GaussianNoise(nn.Module):
    """Multiplicative Gaussian noise (Srivastava et al.), active only in training.

    The noise tensor lives in a buffer so that it is not reallocated every step.
    """

    def __init__(self, shape, sigma=0.1):
        super().__init__()
        self.sigma = sigma
        self.register_buffer("noise", torch.empty(shape), persistent=False)

    def forward(self, x):
        if not self.training:
            return x
        return x * torch.normal(1.0, self.sigma, x.shape, out=self.noise)

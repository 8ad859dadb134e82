"""Sliding windows over a noisy sine wave, for next-value prediction."""
import numpy as np
import torch


def sine_windows(length, window, seed):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 8 * np.pi, length)
    wave = np.sin(t) + 0.05 * rng.standard_normal(length)
    inputs = np.stack([wave[i:i + window] for i in range(length - window)])
    targets = wave[window:]
    return torch.tensor(inputs).unsqueeze(-1), torch.tensor(targets, dtype=torch.float32).unsqueeze(-1)

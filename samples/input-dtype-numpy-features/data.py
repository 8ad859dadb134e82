"""Standardised synthetic features made with numpy, wrapped for a DataLoader."""
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_features(n, seed):
    rng = np.random.default_rng(seed)
    raw = rng.normal(loc=3.0, scale=2.0, size=(n, 8))
    labels = (raw[:, 0] + raw[:, 1] > 6.0).astype(np.int64)
    features = (raw - raw.mean(axis=0)) / raw.std(axis=0)
    return features, labels


def make_loader(features, labels, batch_size=16):
    dataset = TensorDataset(torch.from_numpy(features), torch.from_numpy(labels))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)

"""Synthetic 3-class points, read from rows the way a CSV loader hands them over."""
import random

import torch
from torch.utils.data import DataLoader, TensorDataset

CENTERS = [(2.0, 0.0), (-1.0, 1.7), (-1.0, -1.7)]


def load_rows(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randrange(3)
        cx, cy = CENTERS[label]
        rows.append((cx + rng.gauss(0, 0.5), cy + rng.gauss(0, 0.5), float(label)))
    return rows


def to_tensors(rows):
    points = torch.tensor([r[:2] for r in rows], dtype=torch.float32)
    labels = torch.tensor([r[2] for r in rows], dtype=torch.float32)
    return points, labels


def make_loader(points, labels, shuffle):
    return DataLoader(TensorDataset(points, labels), batch_size=16, shuffle=shuffle)

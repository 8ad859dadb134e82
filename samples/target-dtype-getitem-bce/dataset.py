"""Toy sentiment data: token ids, and label 1 when the review holds more positive than negative words."""
import random

import torch
from torch.utils.data import Dataset

VOCAB = 50
POSITIVE = range(1, 10)
NEGATIVE = range(10, 19)


class ReviewDataset(Dataset):
    def __init__(self, n, length, seed):
        rng = random.Random(seed)
        self.tokens = [torch.tensor([rng.randrange(1, VOCAB) for _ in range(length)]) for _ in range(n)]
        self.labels = [int(sum(t in POSITIVE for t in ids.tolist()) > sum(t in NEGATIVE for t in ids.tolist()))
                       for ids in self.tokens]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], torch.tensor(self.labels[i])

"""nanoGPT's data format: train.bin / val.bin of uint16 token ids, read back with np.memmap."""
import os

import numpy as np
import torch


def prepare(data_dir, vocab_size=32, n_tokens=4096, seed=0):
    """Write a synthetic corpus: a noisy repeating pattern of token ids, 90% train, 10% val."""
    os.makedirs(data_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = (np.arange(n_tokens) * 7 + rng.integers(0, 2, n_tokens)) % vocab_size
    n = int(0.9 * n_tokens)
    ids[:n].astype(np.uint16).tofile(os.path.join(data_dir, "train.bin"))
    ids[n:].astype(np.uint16).tofile(os.path.join(data_dir, "val.bin"))


def get_batch(data_dir, split, batch_size, block_size):
    data = np.memmap(os.path.join(data_dir, "%s.bin" % split), dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    return x, y

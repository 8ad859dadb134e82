"""Character-level corpus in nanoGPT's data/shakespeare_char/prepare.py format.

Writes train.bin / val.bin (uint16 token ids, 90/10 split) and meta.pkl (vocab_size, stoi, itos).
The text is synthetic (a few repeated verse lines) so nothing is downloaded.
"""
import os
import pickle

import numpy as np

LINES = [
    "to be or not to be that is the question",
    "whether tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune",
    "or to take arms against a sea of troubles",
]


def prepare(data_dir, n_lines=160, seed=0):
    os.makedirs(data_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    data = "\n".join(LINES[i] for i in rng.integers(0, len(LINES), n_lines)) + "\n"
    chars = sorted(set(data))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    n = len(data)
    train_ids = np.array([stoi[c] for c in data[:int(n * 0.9)]], dtype=np.uint16)
    val_ids = np.array([stoi[c] for c in data[int(n * 0.9):]], dtype=np.uint16)
    train_ids.tofile(os.path.join(data_dir, "train.bin"))
    val_ids.tofile(os.path.join(data_dir, "val.bin"))
    with open(os.path.join(data_dir, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": itos, "stoi": stoi}, f)
    print(f"train has {len(train_ids):,} tokens, val has {len(val_ids):,} tokens, vocab {len(chars)}")

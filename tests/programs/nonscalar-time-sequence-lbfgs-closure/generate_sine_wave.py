"""generate_sine_wave.py's data: N sine waves of length L with random phase shifts, saved with torch.save."""
import os

import numpy as np
import torch


def generate(path, T=20, L=120, N=12, seed=2):
    np.random.seed(seed)
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype("float64")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    # saved as a tensor, so that torch.load's weights_only default can read it back
    torch.save(torch.from_numpy(data), open(path, "wb"))


if __name__ == "__main__":
    generate("data/traindata.pt")

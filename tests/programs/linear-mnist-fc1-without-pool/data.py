"""MNIST in its IDX format (the *-idx3-ubyte / *-idx1-ubyte files), and a synthetic stand-in."""
import os
import struct

import torch

FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def write_idx(root, split, images, labels):
    img_name, lbl_name = FILES[split]
    n, rows, cols = images.shape
    with open(os.path.join(root, img_name), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, rows, cols))
        f.write(bytes(images.flatten().tolist()))
    with open(os.path.join(root, lbl_name), "wb") as f:
        f.write(struct.pack(">II", 2049, n))
        f.write(bytes(labels.tolist()))


def read_idx(path):
    with open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        ndim = magic & 0xFF
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        data = f.read()
    return torch.tensor(list(data), dtype=torch.uint8).view(*dims)


def write_synthetic_mnist(root, n_train=96, n_test=32, seed=0):
    """Digit-like blobs: class k is a bright bar at row 2k + 4 of a 28x28 image."""
    os.makedirs(root, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        labels = torch.randint(0, 10, (n,), generator=g)
        images = (torch.rand(n, 28, 28, generator=g) * 40)
        for i, k in enumerate(labels.tolist()):
            images[i, 2 * k + 4:2 * k + 6, 4:24] = 255
        write_idx(root, split, images.to(torch.uint8), labels.to(torch.uint8))


class MNIST(torch.utils.data.Dataset):
    def __init__(self, root, train=True, mean=0.1307, std=0.3081):
        img_name, lbl_name = FILES["train" if train else "test"]
        self.data = read_idx(os.path.join(root, img_name))
        self.targets = read_idx(os.path.join(root, lbl_name)).long()
        self.mean, self.std = mean, std

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img = self.data[i].float().div(255).unsqueeze(0)
        return (img - self.mean) / self.std, self.targets[i]

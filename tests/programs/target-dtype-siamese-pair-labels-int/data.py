"""MNIST's idx/ubyte files (written here with synthetic digits) and APP_MATCHER, the pair dataset.

A synthetic "digit" of class c is a bright bar pattern at a class-specific place plus noise, stored
in the same big-endian idx3/idx1 format as train-images-idx3-ubyte / train-labels-idx1-ubyte.
"""
import os
import random
import struct

import numpy as np
import torch
from torch.utils.data import Dataset

FILES = {True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def write_idx(root, train, n, seed):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
    for i, c in enumerate(labels):
        r, col = 3 + 5 * (c // 4), 3 + 6 * (c % 4)
        images[i, r:r + 4, col:col + 5] = 255 - rng.integers(0, 40)
        images[i, 24 - 2 * (c % 3):26 - 2 * (c % 3), 4:24] = 200
    img_name, lbl_name = FILES[train]
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, img_name), "wb") as f:
        f.write(struct.pack(">IIII", 0x00000803, n, 28, 28))
        f.write(images.tobytes())
    with open(os.path.join(root, lbl_name), "wb") as f:
        f.write(struct.pack(">II", 0x00000801, n))
        f.write(labels.astype(np.uint8).tobytes())


def read_idx(path):
    with open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        ndim = magic & 0xFF
        shape = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint8).reshape(shape).copy())


class APP_MATCHER(Dataset):
    def __init__(self, root, train, download=False):
        super(APP_MATCHER, self).__init__()
        img_name, lbl_name = FILES[train]
        if not os.path.exists(os.path.join(root, img_name)):
            if not download:
                raise RuntimeError("Dataset not found in %s" % root)
            write_idx(root, train, 320 if train else 160, seed=0 if train else 1)
        self.targets = read_idx(os.path.join(root, lbl_name)).long()
        # (N, 28, 28) -> (N, 1, 28, 28): one gray-scale channel per example
        self.data = read_idx(os.path.join(root, img_name)).unsqueeze(1).clone()
        self.group_examples()

    def group_examples(self):
        """Group the example indices by class, so that a pair can be drawn from one or two classes."""
        np_arr = self.targets.numpy()
        self.grouped_examples = {}
        for i in range(0, 10):
            self.grouped_examples[i] = np.where((np_arr == i))[0]

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        """An even index gives a positive pair (two images of one class), an odd one a negative pair."""
        selected_class = random.randint(0, 9)
        random_index_1 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)
        index_1 = self.grouped_examples[selected_class][random_index_1]
        image_1 = self.data[index_1].clone().float()

        if index % 2 == 0:
            random_index_2 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)
            while random_index_2 == random_index_1:
                random_index_2 = random.randint(0, self.grouped_examples[selected_class].shape[0] - 1)
            index_2 = self.grouped_examples[selected_class][random_index_2]
            image_2 = self.data[index_2].clone().float()
            target = torch.tensor(1)
        else:
            other_selected_class = random.randint(0, 9)
            while other_selected_class == selected_class:
                other_selected_class = random.randint(0, 9)
            random_index_2 = random.randint(0, self.grouped_examples[other_selected_class].shape[0] - 1)
            index_2 = self.grouped_examples[other_selected_class][random_index_2]
            image_2 = self.data[index_2].clone().float()
            target = torch.tensor(0)

        return image_1, image_2, target

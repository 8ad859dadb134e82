"""A folder of 8-bit greyscale PGM images, read the way ImageFolder reads a class tree."""
import os

import torch


def write_synthetic_folder(root, n_images=64, size=16, seed=0):
    """Writes root/blobs/img_XXXX.pgm: soft blobs on a dark background."""
    g = torch.Generator().manual_seed(seed)
    cls_dir = os.path.join(root, "blobs")
    os.makedirs(cls_dir, exist_ok=True)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for i in range(n_images):
        cy, cx = torch.randint(4, size - 4, (2,), generator=g).tolist()
        img = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2).float() / 10.0)
        pixels = (img * 255).clamp(0, 255).to(torch.uint8)
        with open(os.path.join(cls_dir, "img_%04d.pgm" % i), "wb") as f:
            f.write(b"P5\n%d %d\n255\n" % (size, size))
            f.write(bytes(pixels.flatten().tolist()))


def read_pgm(path):
    with open(path, "rb") as f:
        magic = f.readline().strip()
        if magic != b"P5":
            raise ValueError("%s: not a binary PGM" % path)
        width, height = (int(v) for v in f.readline().split())
        maxval = int(f.readline())
        data = f.read(width * height)
    img = torch.tensor(list(data), dtype=torch.float32).view(1, height, width)
    return img / maxval


class ImageFolder(torch.utils.data.Dataset):
    """(image, class index) pairs, images normalised to [-1, 1] like Normalize((0.5,), (0.5,))."""

    def __init__(self, root):
        self.classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.samples = []
        for idx, cls in enumerate(self.classes):
            for name in sorted(os.listdir(os.path.join(root, cls))):
                if name.endswith(".pgm"):
                    self.samples.append((os.path.join(root, cls, name), idx))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        return read_pgm(path) * 2 - 1, target

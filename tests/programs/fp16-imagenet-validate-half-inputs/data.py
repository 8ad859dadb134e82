"""A class-per-folder tree of 8-bit RGB PPM images, read the way torchvision's ImageFolder reads one."""
import os

import torch


def write_synthetic_tree(root, classes=4, per_class=12, size=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    for c in range(classes):
        d = os.path.join(root, f"class_{c}")
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            base = torch.zeros(3, size, size)
            base[c % 3] += 0.6 + 0.1 * c
            img = (base + 0.25 * torch.rand(3, size, size, generator=g)).clamp(0, 1)
            pixels = (img.permute(1, 2, 0) * 255).to(torch.uint8)
            with open(os.path.join(d, f"img_{i:03d}.ppm"), "wb") as f:
                f.write(f"P6 {size} {size} 255\n".encode() + bytes(pixels.flatten().tolist()))


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    header, _, rest = data.partition(b"\n")
    _, w, h, _ = header.split()
    pixels = torch.tensor(list(rest[: int(w) * int(h) * 3]), dtype=torch.uint8)
    return pixels.view(int(h), int(w), 3).permute(2, 0, 1).float() / 255.0


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)):
        self.classes = sorted(os.listdir(root))
        self.samples = [(os.path.join(root, c, f), i) for i, c in enumerate(self.classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]
        self.mean = torch.tensor(mean).view(3, 1, 1)
        self.std = torch.tensor(std).view(3, 1, 1)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        return (read_ppm(path) - self.mean) / self.std, target

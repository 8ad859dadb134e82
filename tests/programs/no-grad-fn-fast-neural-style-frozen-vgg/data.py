"""A folder of training images in ImageFolder's layout (root/<class>/<image>.ppm) and a style
image, written once with synthetic content (smooth colour gradients with blobs)."""
import os

import numpy as np
import torch

from utils import load_image, save_image


def write_synthetic(root, n_images=8, size=32, seed=0):
    """Write n_images content images under root/images/ and root/style.ppm (once)."""
    folder = os.path.join(root, "images")
    style = os.path.join(root, "style.ppm")
    if os.path.exists(style) and len(os.listdir(folder)) >= n_images:
        return folder, style
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    for i in range(n_images):
        base = np.stack([xx * rng.uniform(), yy * rng.uniform(), (xx + yy) / 2 * rng.uniform()], 0)
        cx, cy = rng.uniform(size=2)
        blob = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) * 20)
        img = np.clip((base + blob) * 200, 0, 255)
        save_image(os.path.join(folder, f"img_{i:03d}.ppm"), torch.from_numpy(img).float())
    stripes = (np.sin(xx * 25) * np.cos(yy * 17) + 1) * 127
    save_image(style, torch.from_numpy(np.stack([stripes, stripes[::-1], 255 - stripes], 0).copy()).float())
    return folder, style


class ImageFolder(torch.utils.data.Dataset):
    """The images of a folder tree as (image [3, S, S] in 0..255, class index) pairs."""

    def __init__(self, root, image_size):
        self.samples = []
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        for ci, c in enumerate(classes):
            for name in sorted(os.listdir(os.path.join(root, c))):
                if name.endswith(".ppm"):
                    self.samples.append((os.path.join(root, c, name), ci))
        self.image_size = image_size

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        return load_image(path, size=self.image_size), target

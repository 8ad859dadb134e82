import numpy as np
import torch


def load_image(filename, size=None, scale=None):
    """An RGB image from a binary PPM (P6) file as a float tensor [3, H, W] in 0..255, resized
    (nearest neighbour) to size x size or scaled down by scale."""
    with open(filename, "rb") as f:
        magic = f.readline().strip()
        if magic != b"P6":
            raise ValueError(f"{filename}: not a binary PPM image")
        line = f.readline()
        while line.startswith(b"#"):
            line = f.readline()
        w, h = map(int, line.split())
        int(f.readline())
        data = np.frombuffer(f.read(w * h * 3), dtype=np.uint8).reshape(h, w, 3)
    img = torch.from_numpy(data.copy()).permute(2, 0, 1).float()
    if size is not None:
        img = torch.nn.functional.interpolate(img[None], size=(size, size), mode="nearest")[0]
    elif scale is not None:
        img = torch.nn.functional.interpolate(img[None], scale_factor=1 / scale, mode="nearest")[0]
    return img


def save_image(filename, data):
    img = data.clone().clamp(0, 255).numpy()
    img = img.transpose(1, 2, 0).astype("uint8")
    with open(filename, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (img.shape[1], img.shape[0]))
        f.write(img.tobytes())


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    # normalize using imagenet mean and std
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std

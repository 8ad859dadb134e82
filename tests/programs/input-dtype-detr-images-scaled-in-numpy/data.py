"""Single-object images with COCO-style annotations (instances_<split>.json + an image array).

The annotation file follows COCO's layout (images / annotations / categories, bbox as absolute
[x, y, w, h]); the pixels live in images_<split>.npy (N, 3, H, W uint8) instead of JPEG files.
The dataset returns DETR-style targets: the class label and the box as normalized cx, cy, w, h.
"""
import json
import os

import numpy as np
import torch

CATEGORIES = [{"id": 1, "name": "red"}, {"id": 2, "name": "green"}, {"id": 3, "name": "blue"}]


def write_synthetic_dataset(root, sizes=(("train", 128), ("val", 48)), image_size=32, seed=0):
    """One coloured rectangle per image on a noisy background; its colour is its category."""
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in sizes:
        images = rng.integers(0, 60, size=(n, 3, image_size, image_size), dtype=np.uint8)
        anns, imgs = [], []
        for i in range(n):
            cat = int(rng.integers(0, len(CATEGORIES)))
            w, h = (int(v) for v in rng.integers(6, image_size // 2, size=2))
            x, y = int(rng.integers(0, image_size - w)), int(rng.integers(0, image_size - h))
            images[i, cat, y:y + h, x:x + w] = 220
            imgs.append({"id": i, "file_name": f"{split}/{i:06d}", "width": image_size, "height": image_size})
            anns.append({"id": i, "image_id": i, "category_id": CATEGORIES[cat]["id"],
                         "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0})
        np.save(os.path.join(root, f"images_{split}.npy"), images)
        with open(os.path.join(root, f"instances_{split}.json"), "w") as f:
            json.dump({"images": imgs, "annotations": anns, "categories": CATEGORIES}, f)


class CocoSingleObject(torch.utils.data.Dataset):
    def __init__(self, root, split):
        with open(os.path.join(root, f"instances_{split}.json")) as f:
            coco = json.load(f)
        self.images = np.load(os.path.join(root, f"images_{split}.npy"))
        self.cat_to_label = {c["id"]: i for i, c in enumerate(coco["categories"])}
        self.num_classes = len(self.cat_to_label)
        self.anns = {a["image_id"]: a for a in coco["annotations"]}
        self.ids = [img["id"] for img in coco["images"]]
        self.sizes = {img["id"]: (img["width"], img["height"]) for img in coco["images"]}

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, idx):
        image_id = self.ids[idx]
        img = torch.from_numpy(self.images[idx] / 255.0)
        img = (img - 0.2) / 0.3
        ann = self.anns[image_id]
        W, H = self.sizes[image_id]
        x, y, w, h = ann["bbox"]
        box = torch.tensor([(x + w / 2) / W, (y + h / 2) / H, w / W, h / H])
        return img, {"labels": torch.tensor(self.cat_to_label[ann["category_id"]]), "boxes": box,
                     "image_id": torch.tensor(image_id)}


def collate_fn(batch):
    imgs, targets = zip(*batch)
    return torch.stack(imgs), {k: torch.stack([t[k] for t in targets]) for k in targets[0]}

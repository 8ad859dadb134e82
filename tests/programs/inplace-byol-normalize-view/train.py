"""Self-supervised BYOL pre-training of a small CNN on synthetic images, then a linear probe.

Modeled on lucidrains/byol-pytorch, byol_pytorch/byol_pytorch.py and its README training loop
(MIT licence): NetWrapper with a projector MLP, an online predictor, a target encoder that is an
EMA of the online one (update_moving_average after each step), the symmetric normalised-MSE loss.
Written from scratch for tracefix's test bed, following that program's structure; the argparse
options, cosine schedule, checkpoint and linear probe are this bed's additions. Injected bug:
get_representation in byol.py normalises a view of the backbone's ReLU output in place.
"""
import argparse
import logging
import os

import torch
import torch.nn as nn

from augment import random_view
from byol import BYOL

parser = argparse.ArgumentParser(description="BYOL pre-training")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--image-size", type=int, default=16)
parser.add_argument("--n-images", type=int, default=64)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--ckpt-dir", default="checkpoints")
args = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
log = logging.getLogger("byol")
torch.manual_seed(args.seed)
gen = torch.Generator().manual_seed(args.seed)


def make_dataset(n, size):
    """Striped images in two orientations: the label is the orientation."""
    labels = torch.randint(0, 2, (n,), generator=gen)
    coords = torch.arange(size).float()
    freq = 0.5 + torch.rand(n, generator=gen)
    rows = torch.sin(freq[:, None, None] * coords[None, :, None]).expand(n, size, size)
    cols = torch.sin(freq[:, None, None] * coords[None, None, :]).expand(n, size, size)
    images = torch.where(labels[:, None, None].bool(), rows, cols).unsqueeze(1).repeat(1, 3, 1, 1)
    return images + 0.1 * torch.randn(images.shape, generator=gen), labels


backbone = nn.Sequential(
    nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
    nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
)
rep_dim = 8 * (args.image_size // 4) ** 2
learner = BYOL(backbone, rep_dim, projection_size=16, projection_hidden_size=32)
opt = torch.optim.Adam(learner.parameters(), lr=args.lr)
images, labels = make_dataset(args.n_images, args.image_size)
steps_per_epoch = args.n_images // args.batch_size
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * steps_per_epoch)


def linear_probe():
    """Fits a logistic-regression probe on frozen representations; returns its accuracy."""
    learner.eval()
    with torch.no_grad():
        feats = learner(images, None, return_embedding=True)
    learner.train()
    probe = nn.Linear(feats.shape[1], 2)
    probe_opt = torch.optim.SGD(probe.parameters(), lr=0.5)
    for _ in range(50):
        probe_opt.zero_grad()
        nn.functional.cross_entropy(probe(feats), labels).backward()
        probe_opt.step()
    return (probe(feats).argmax(1) == labels).float().mean().item()


os.makedirs(args.ckpt_dir, exist_ok=True)
for epoch in range(args.epochs):
    perm = torch.randperm(args.n_images, generator=gen)
    for step in range(steps_per_epoch):
        batch = images[perm[step * args.batch_size:(step + 1) * args.batch_size]]
        view_one = random_view(batch, args.image_size, gen)
        view_two = random_view(batch, args.image_size, gen)
        loss = learner(view_one, view_two)
        opt.zero_grad()
        loss.backward()
        opt.step()
        scheduler.step()
        learner.update_moving_average()
        log.info("epoch %d step %d loss %.4f lr %.5f", epoch, step, loss.item(), scheduler.get_last_lr()[0])
    acc = linear_probe()
    log.info("epoch %d linear probe accuracy %.3f", epoch, acc)
    torch.save(backbone.state_dict(), os.path.join(args.ckpt_dir, "improved-net.pt"))

print("done: linear probe accuracy %.3f" % acc)

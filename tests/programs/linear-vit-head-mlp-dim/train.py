"""ViT classifier on synthetic 16x16 images, with random patch dropping during training.

Modeled on lucidrains/vit-pytorch, vit_pytorch/vit.py (MIT licence): FeedForward, Attention with
to_qkv / attend / to_out, a pre-norm Transformer, patch embedding with LayerNorms, cls token and
pos embedding. Written from scratch for tracefix's test bed, following that program's structure;
the training loop (AdamW, warmup-cosine schedule, clipping, evaluation, checkpoint) is this bed's.
Injected bug: ViT builds its classification head as nn.Linear(mlp_dim, num_classes), but the cls
token it gets has dim features; the forward fails at mlp_head, the fix is the head's construction.
"""
import argparse
import logging
import math
import os

import torch
import torch.nn.functional as F

from vit import ViT

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--warmup", type=int, default=2)
parser.add_argument("--patch-drop", type=float, default=0.25)
parser.add_argument("--out", default="checkpoints")
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(message)s")
log = logging.getLogger("vit")
torch.manual_seed(0)

labels = torch.randint(0, 2, (64,))
images = torch.randn(64, 1, 16, 16) * 0.3 + labels[:, None, None, None].float()
train_x, train_y, val_x, val_y = images[:48], labels[:48], images[48:], labels[48:]
model = ViT(image_size=16, patch_size=4, num_classes=2, dim=16, depth=2, heads=2, mlp_dim=32)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
total = args.epochs * (len(train_x) // args.batch_size)
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: (s + 1) / args.warmup if s < args.warmup else 0.5 * (1 + math.cos(math.pi * s / total)))


def evaluate():
    model.eval()
    with torch.no_grad():
        acc = (model(val_x).argmax(1) == val_y).float().mean().item()
    model.train()
    return acc


os.makedirs(args.out, exist_ok=True)
for epoch in range(args.epochs):
    perm = torch.randperm(len(train_x))
    for i in range(0, len(train_x), args.batch_size):
        idx = perm[i:i + args.batch_size]
        keep = torch.rand(len(idx), 16) > args.patch_drop
        loss = F.cross_entropy(model(train_x[idx], keep), train_y[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        log.info("epoch %d step %d loss %.4f", epoch, i // args.batch_size, loss.item())
    log.info("epoch %d val acc %.3f", epoch, evaluate())
    torch.save(model.state_dict(), os.path.join(args.out, "vit.pt"))
print("done: val accuracy %.3f" % evaluate())

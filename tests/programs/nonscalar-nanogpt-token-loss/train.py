"""Train a tiny GPT on a synthetic token corpus.

Modeled on karpathy/nanoGPT, train.py and model.py (MIT licence): config globals overridable from
the command line, get_batch from .bin memmaps, estimate_loss() over train/val, a warmup + cosine
get_lr(), gradient accumulation, grad clipping, AdamW from configure_optimizers, ckpt.pt on a new
best val loss. Written from scratch for tracefix's test bed, following that program's structure.
Injected bug: GPT.forward computes the cross-entropy with reduction='none' (one loss per token);
the training step's backward and estimate_loss()'s .item() both use the model's loss, so the fix
is the loss line in model.py.
"""
import argparse
import math
import os
import time

import torch

from data import get_batch, prepare
from model import GPT, GPTConfig

parser = argparse.ArgumentParser()
parser.add_argument("--out_dir", default="out")
parser.add_argument("--data_dir", default="data/synthetic")
parser.add_argument("--eval_interval", type=int, default=4)
parser.add_argument("--eval_iters", type=int, default=2)
parser.add_argument("--log_interval", type=int, default=2)
parser.add_argument("--gradient_accumulation_steps", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--block_size", type=int, default=16)
parser.add_argument("--learning_rate", type=float, default=6e-4)
parser.add_argument("--max_iters", type=int, default=8)
parser.add_argument("--weight_decay", type=float, default=1e-1)
parser.add_argument("--beta1", type=float, default=0.9)
parser.add_argument("--beta2", type=float, default=0.95)
parser.add_argument("--grad_clip", type=float, default=1.0)
parser.add_argument("--warmup_iters", type=int, default=2)
parser.add_argument("--lr_decay_iters", type=int, default=8)
parser.add_argument("--min_lr", type=float, default=6e-5)
args = parser.parse_args()

torch.manual_seed(1337)
os.makedirs(args.out_dir, exist_ok=True)
if not os.path.exists(os.path.join(args.data_dir, "train.bin")):
    prepare(args.data_dir)

model = GPT(GPTConfig(block_size=args.block_size))
optimizer = model.configure_optimizers(args.weight_decay, args.learning_rate, (args.beta1, args.beta2))


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            X, Y = get_batch(args.data_dir, split, args.batch_size, args.block_size)
            logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < args.warmup_iters:
        return args.learning_rate * (it + 1) / (args.warmup_iters + 1)
    if it > args.lr_decay_iters:
        return args.min_lr
    decay_ratio = (it - args.warmup_iters) / (args.lr_decay_iters - args.warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return args.min_lr + coeff * (args.learning_rate - args.min_lr)


X, Y = get_batch(args.data_dir, "train", args.batch_size, args.block_size)
t0 = time.time()
iter_num, best_val_loss, epochs = 0, 1e9, 0
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % args.eval_interval == 0 and iter_num > 0:
        losses = estimate_loss()
        epochs += 1
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if losses["val"] < best_val_loss:
            best_val_loss = losses["val"]
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "iter_num": iter_num, "best_val_loss": best_val_loss},
                       os.path.join(args.out_dir, "ckpt.pt"))
    if iter_num >= args.max_iters:
        break
    for micro_step in range(args.gradient_accumulation_steps):
        logits, loss = model(X, Y)
        loss = loss / args.gradient_accumulation_steps
        X, Y = get_batch(args.data_dir, "train", args.batch_size, args.block_size)
        loss.backward()
    if args.grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num % args.log_interval == 0:
        print(f"iter {iter_num}: time {dt * 1000:.2f}ms, lr {lr:.2e}")
    iter_num += 1

print(f"done: {epochs} epochs of {args.eval_interval} iters, best val loss {best_val_loss:.4f}")

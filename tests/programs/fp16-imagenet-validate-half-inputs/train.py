"""ImageNet-style training of a small ResNet on a folder tree of PPM images.

Modeled on pytorch/examples, imagenet/main.py (BSD-3-Clause licence): argparse options, a
train()/validate() pair with AverageMeter/ProgressMeter, top-1 accuracy, SGD with momentum and
StepLR, best-acc1 checkpoints. Written from scratch for tracefix's test bed, following that program's
structure, with mixed precision through torch.autocast and a GradScaler.
Injected bug: `--half` (default on) casts the model with model.half(), and validate() casts its
images with .half() to match; the GradScaler then refuses the fp16 gradients in train(). The fix is
to remove model.half() and the images' .half() in validate(), which only matched the half weights.
"""
import argparse
import logging
import os
import time

import torch
import torch.nn as nn

from data import ImageFolder, write_synthetic_tree
from model import ResNetTiny
from utils import AverageMeter, ProgressMeter, accuracy, save_checkpoint

log = logging.getLogger("imagenet")

parser = argparse.ArgumentParser(description="PyTorch ImageNet Training (tiny)")
parser.add_argument("--data", default="data", help="path to dataset")
parser.add_argument("--epochs", default=2, type=int)
parser.add_argument("-b", "--batch-size", default=8, type=int)
parser.add_argument("--lr", default=0.05, type=float)
parser.add_argument("--momentum", default=0.9, type=float)
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
parser.add_argument("-p", "--print-freq", default=2, type=int)
parser.add_argument("--half", action=argparse.BooleanOptionalAction, default=True,
                    help="train in half precision")
parser.add_argument("--out-dir", default="out")
parser.add_argument("--seed", default=0, type=int)


def train(train_loader, model, criterion, optimizer, scaler, epoch, args):
    batch_time, losses, top1 = AverageMeter("Time", ":6.3f"), AverageMeter("Loss", ":.4e"), AverageMeter("Acc@1", ":6.2f")
    progress = ProgressMeter(len(train_loader), [batch_time, losses, top1], prefix=f"Epoch: [{epoch}]")
    model.train()
    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        with torch.autocast(device_type="cpu", dtype=torch.float16, enabled=args.half):
            output = model(images)
            loss = criterion(output, target)
        acc1, = accuracy(output.float(), target, topk=(1,))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0].item(), images.size(0))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        batch_time.update(time.time() - end)
        end = time.time()
        if i % args.print_freq == 0:
            progress.display(i)


def validate(val_loader, model, criterion, args):
    losses, top1 = AverageMeter("Loss", ":.4e"), AverageMeter("Acc@1", ":6.2f")
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            if args.half:
                images = images.half()
            output = model(images)
            loss = criterion(output.float(), target)
            acc1, = accuracy(output.float(), target, topk=(1,))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0].item(), images.size(0))
    print(f" * Acc@1 {top1.avg:.3f} loss {losses.avg:.4f}")
    return top1.avg


def main():
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(args.seed)
    if not os.path.isdir(os.path.join(args.data, "train")):
        write_synthetic_tree(os.path.join(args.data, "train"), per_class=12, seed=1)
        write_synthetic_tree(os.path.join(args.data, "val"), per_class=4, seed=2)
    os.makedirs(args.out_dir, exist_ok=True)
    model = ResNetTiny(num_classes=4)
    if args.half:
        model.half()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", enabled=args.half)
    train_loader = torch.utils.data.DataLoader(ImageFolder(os.path.join(args.data, "train")),
                                               batch_size=args.batch_size, shuffle=True)
    val_loader = torch.utils.data.DataLoader(ImageFolder(os.path.join(args.data, "val")),
                                             batch_size=args.batch_size)
    best_acc1 = 0.0
    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, scaler, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        scheduler.step()
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        save_checkpoint({"epoch": epoch + 1, "state_dict": model.state_dict(), "best_acc1": best_acc1,
                         "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
                        is_best, args.out_dir)
        log.info("epoch %d done, lr %.4f", epoch, scheduler.get_last_lr()[0])
    print(f"done: {args.epochs} epochs, best Acc@1 {best_acc1:.3f}, last loss printed above")


if __name__ == "__main__":
    main()

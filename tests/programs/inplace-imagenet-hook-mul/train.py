"""ResNet classification on synthetic images, train / validate / checkpoint per epoch.

Modeled on pytorch/examples, imagenet/main.py (BSD-3-Clause licence): argparse options, train()
and validate() with AverageMeter and top-k accuracy, SGD with momentum and StepLR, best-acc1
tracking and save_checkpoint. Written from scratch for tracefix's test bed, following that
program's structure. Injected bug: utils.attach_activation_scaling registers a forward hook that
scales each ReLU's output in place, and ReLU's backward saved that output.
"""
import argparse
import logging

import torch
import torch.nn as nn

from model import ResNet
from utils import AverageMeter, accuracy, attach_activation_scaling, save_checkpoint

parser = argparse.ArgumentParser(description="ResNet training")
parser.add_argument("--epochs", default=2, type=int)
parser.add_argument("-b", "--batch-size", default=16, type=int)
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--momentum", default=0.9, type=float)
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
parser.add_argument("--act-scale", default=0.9, type=float)
parser.add_argument("--seed", default=0, type=int)
args = parser.parse_args()
logging.basicConfig(level=logging.INFO, format="%(message)s")
log = logging.getLogger("imagenet")
torch.manual_seed(args.seed)

labels = torch.randint(0, 4, (64,))
images = torch.randn(64, 3, 16, 16) * 0.5 + labels[:, None, None, None].float() / 2
train_set = torch.utils.data.TensorDataset(images[:48], labels[:48])
val_set = torch.utils.data.TensorDataset(images[48:], labels[48:])
train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
val_loader = torch.utils.data.DataLoader(val_set, batch_size=args.batch_size)


def train(train_loader, model, criterion, optimizer, epoch):
    losses, top1 = AverageMeter("Loss", ":.4e"), AverageMeter("Acc@1", ":6.2f")
    model.train()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        acc1, = accuracy(output, target, topk=(1,))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1.item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log.info("Epoch: [%d][%d/%d]\t%s\t%s", epoch, i, len(train_loader), losses, top1)


def validate(val_loader, model, criterion):
    top1 = AverageMeter("Acc@1", ":6.2f")
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            acc1, = accuracy(model(images), target, topk=(1,))
            top1.update(acc1.item(), images.size(0))
    log.info(" * Acc@1 %.3f", top1.avg)
    return top1.avg


model = ResNet()
attach_activation_scaling(model, args.act_scale)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
best_acc1 = 0
for epoch in range(args.epochs):
    train(train_loader, model, criterion, optimizer, epoch)
    acc1 = validate(val_loader, model, criterion)
    scheduler.step()
    is_best = acc1 > best_acc1
    best_acc1 = max(acc1, best_acc1)
    save_checkpoint({"epoch": epoch + 1, "state_dict": model.state_dict(), "best_acc1": best_acc1,
                     "optimizer": optimizer.state_dict()}, is_best)
print("done: best Acc@1 %.3f" % best_acc1)

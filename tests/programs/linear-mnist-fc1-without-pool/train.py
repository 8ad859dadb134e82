"""MNIST classifier on synthetic IDX files, with a criterion object shared by train and test.

Modeled on pytorch/examples, mnist/main.py (BSD-3-Clause licence): the Net convnet, train() and
test() functions with their log lines, Adadelta with StepLR(gamma=0.7), --dry-run, --save-model.
Written from scratch for tracefix's test bed, following that program's structure. Injected bug:
model.py sizes fc1 for the conv output before max-pooling (16 * 24 * 24), so the forward fails at
fc1 with 16 * 12 * 12 features; the fix is fc1's construction, not the forward line.
"""
import argparse
import logging
import os

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

from data import MNIST, write_synthetic_mnist
from model import Net

log = logging.getLogger("mnist")


def train(args, model, device, train_loader, optimizer, criterion, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            log.info("Train Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f", epoch, batch_idx * len(data),
                     len(train_loader.dataset), 100.0 * batch_idx / len(train_loader), loss.item())
            if args.dry_run:
                break


def test(model, device, test_loader, criterion):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += criterion(output, target).item() * len(data)
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    log.info("Test set: Average loss: %.4f, Accuracy: %d/%d (%.0f%%)", test_loss, correct,
             len(test_loader.dataset), 100.0 * correct / len(test_loader.dataset))
    return correct / len(test_loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
    parser.add_argument("--batch-size", type=int, default=16, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--epochs", type=int, default=2, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--dry-run", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=2, metavar="N")
    parser.add_argument("--data", default="data/MNIST/raw")
    parser.add_argument("--save-model", action="store_true", default=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(args.seed)
    device = torch.device("cpu")

    if not os.path.exists(os.path.join(args.data, "train-images-idx3-ubyte")):
        write_synthetic_mnist(args.data)
    train_loader = torch.utils.data.DataLoader(MNIST(args.data, train=True),
                                               batch_size=args.batch_size, shuffle=True)
    test_loader = torch.utils.data.DataLoader(MNIST(args.data, train=False),
                                              batch_size=args.test_batch_size)

    model = Net().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, criterion, epoch)
        acc = test(model, device, test_loader, criterion)
        scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")
    print("done: %d epochs, test accuracy %.3f" % (args.epochs, acc))


if __name__ == "__main__":
    main()

"""Train a Siamese network to tell whether two (synthetic) MNIST digits are of the same class.

Modeled on pytorch/examples siamese_network/main.py (BSD-3-Clause licence): APP_MATCHER pairs
built from MNIST's idx files (positive pairs at even indices, negative at odd), a SiameseNetwork
with a ResNet trunk shared by both images, BCELoss on the sigmoid output, train() logging
loss.item() every --log-interval batches, test() summing the loss and counting correct pairs,
Adadelta with StepLR, argparse with --dry-run and --save-model. Written from scratch for tracefix's
test bed, following that program's structure; the digits are synthetic idx files written to data/.
Injected bug: APP_MATCHER.__getitem__ builds each pair's label as torch.tensor(1) or
torch.tensor(0), int64, where BCELoss wants float targets; train()'s criterion call is the crash
line, test()'s criterion call reads the same dataset class, and the label is built in both branches
of the positive/negative choice, so the fix is both builders in data.py.
"""
from __future__ import print_function

import argparse
import os
import random

import torch
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

from data import APP_MATCHER
from losses import similarity_criterion
from model import SiameseNetwork


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    criterion = similarity_criterion()

    for batch_idx, (images_1, images_2, targets) in enumerate(train_loader):
        images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(images_1), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
            if args.dry_run:
                break


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    criterion = similarity_criterion()

    with torch.no_grad():
        for (images_1, images_2, targets) in test_loader:
            images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
            outputs = model(images_1, images_2).squeeze()
            test_loss += criterion(outputs, targets).item() * len(targets)  # sum up batch loss
            pred = torch.where(outputs > 0.5, 1, 0)
            correct += pred.eq(targets.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)
    accuracy = 100. * correct / len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset), accuracy))
    return test_loss, accuracy


def main():
    parser = argparse.ArgumentParser(description='PyTorch Siamese network Example')
    parser.add_argument('--batch-size', type=int, default=32, metavar='N',
                        help='input batch size for training (default: 32)')
    parser.add_argument('--test-batch-size', type=int, default=80, metavar='N',
                        help='input batch size for testing (default: 80)')
    parser.add_argument('--epochs', type=int, default=2, metavar='N',
                        help='number of epochs to train (default: 2)')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR',
                        help='learning rate (default: 1.0)')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M',
                        help='Learning rate step gamma (default: 0.7)')
    parser.add_argument('--dry-run', action='store_true', default=False,
                        help='quickly check a single pass')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=4, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--save-model', action='store_true', default=False,
                        help='For Saving the current Model')
    parser.add_argument('--data', default='data', help='where the idx files are (written if missing)')
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = torch.device("cpu")
    print(f"Using device: {device}")

    train_kwargs = {'batch_size': args.batch_size}
    test_kwargs = {'batch_size': args.test_batch_size}

    train_dataset = APP_MATCHER(args.data, train=True, download=True)
    test_dataset = APP_MATCHER(args.data, train=False, download=True)
    train_loader = torch.utils.data.DataLoader(train_dataset, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(test_dataset, **test_kwargs)

    model = SiameseNetwork().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test_loss, accuracy = test(model, device, test_loader)
        scheduler.step()

    if args.save_model:
        os.makedirs("checkpoints", exist_ok=True)
        torch.save(model.state_dict(), os.path.join("checkpoints", "siamese_network.pt"))
    print('done: {} epochs, test loss {:.4f}, accuracy {:.0f}%'.format(args.epochs, test_loss, accuracy))


if __name__ == '__main__':
    main()

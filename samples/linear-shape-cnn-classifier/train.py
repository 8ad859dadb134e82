"""Train the small CNN of models.py on synthetic CIFAR-shaped batches, with an evaluation pass."""
import argparse

import torch
import torch.nn as nn

from models import ConvNet


def evaluate(model, images, labels):
    model.eval()
    with torch.no_grad():
        correct = (model(images).argmax(dim=1) == labels).sum().item()
    model.train()
    return correct / len(labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    torch.manual_seed(0)
    images = torch.randn(32, 3, 32, 32)
    labels = torch.randint(0, 10, (32,))
    model = ConvNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for step in range(args.steps):
        batch = slice((step * 8) % 32, (step * 8) % 32 + 8)
        optimizer.zero_grad()
        loss = criterion(model(images[batch]), labels[batch])
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    print(f"eval accuracy {evaluate(model, images, labels):.3f}")


if __name__ == "__main__":
    main()

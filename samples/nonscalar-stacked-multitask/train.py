"""Multi-task training: predict a category and a continuous target jointly."""
import argparse

import torch
import torch.nn.functional as F

from model import MultiHead


def compute_losses(model, batch):
    x, cls_target, reg_target = batch
    cls_logits, reg_pred = model(x)
    return F.cross_entropy(cls_logits, cls_target), F.smooth_l1_loss(reg_pred, reg_target)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(100, 10)
    batch = (x, (x[:, 0] > 0).long() * 2 + (x[:, 1] > 0).long(), x[:, 2:5].sum(dim=1))
    model = MultiHead(10, args.hidden, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for step in range(args.steps):
        cls_loss, reg_loss = compute_losses(model, batch)
        loss = torch.stack([cls_loss, reg_loss])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {float(loss):.4f} (cls {cls_loss.item():.3f} reg {reg_loss.item():.3f})")


if __name__ == "__main__":
    main()

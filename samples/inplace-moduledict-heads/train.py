"""Jointly classify and score items with a two-headed network."""
import torch
import torch.nn.functional as F

from model import MultiTaskNet

TASK_WEIGHTS = {"label": 1.0, "score": 0.5}


def task_losses(out, batch):
    return {
        "label": F.cross_entropy(out["label"], batch["label"]),
        "score": F.mse_loss(out["score"].squeeze(-1), batch["score"]),
    }


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 12)
    batch = {"label": torch.randint(0, 4, (64,)), "score": x[:, :3].sum(dim=1)}

    net = MultiTaskNet(12, 48, 4)
    optimizer = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.01)
    for step in range(5):
        losses = task_losses(net(x), batch)
        loss = sum(TASK_WEIGHTS[t] * v for t, v in losses.items())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        parts = " ".join(f"{t}={v.item():.3f}" for t, v in losses.items())
        print(f"step {step} loss {loss.item():.4f} ({parts})")


if __name__ == "__main__":
    main()

"""Fit a regression MLP; all settings come from config.CONFIG."""
import torch

from config import CONFIG
from engine import Engine, build_model


def synthetic_batch(n, d):
    x = torch.randn(n, d)
    return x, (x[:, :4].sum(dim=1, keepdim=True) * 0.5).tanh()


def main(cfg=CONFIG):
    torch.manual_seed(0)
    engine = Engine(build_model(cfg), cfg)
    x, y = synthetic_batch(cfg["batch_size"], cfg["model"]["in_features"])
    for step in range(cfg["steps"]):
        loss = engine.step(x, y)
        print(f"step {step} loss {loss:.4f}")


if __name__ == "__main__":
    main()

"""Regression MLP from a model factory: train.py chooses torch_dtype from --fp16 and hands it to
load_model(), which casts the whole model to it; the GradScaler then refuses the fp16 gradients."""
import argparse

import torch

from models import load_model


def main():
    torch.manual_seed(0)
    p = argparse.ArgumentParser()
    p.add_argument("--fp16", action="store_true", default=True)
    cfg = p.parse_args()
    torch_dtype = torch.float16 if cfg.fp16 else torch.float32
    model = load_model(8, torch_dtype=torch_dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for step in range(5):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()

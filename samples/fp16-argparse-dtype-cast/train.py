"""Denoising autoencoder on synthetic signals; mixed precision selectable from the CLI."""
import argparse

import torch
import torch.nn as nn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def get_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp16",
                        help="compute precision of the forward pass")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    return parser.parse_args()


def build_autoencoder(dim=64, code=8):
    return nn.Sequential(
        nn.Linear(dim, 32), nn.SiLU(), nn.Linear(32, code),
        nn.Linear(code, 32), nn.SiLU(), nn.Linear(32, dim),
    )


def main():
    args = get_args()
    torch.manual_seed(0)
    dtype = DTYPES[args.dtype]
    model = build_autoencoder().to(args.device, dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler(args.device, enabled=dtype == torch.float16)

    t = torch.linspace(0, 6.28, 64)
    clean = torch.sin(t * torch.rand(args.batch_size, 1) * 4)
    for step in range(args.steps):
        noisy = clean + 0.1 * torch.randn_like(clean)
        with torch.autocast(device_type=args.device, dtype=dtype):
            loss = nn.functional.mse_loss(model(noisy), clean)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()

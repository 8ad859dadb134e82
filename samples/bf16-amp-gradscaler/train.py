"""Train a small MLP classifier in bfloat16 with a GradScaler left over from fp16 AMP."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=20, hidden=64, num_classes=5):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(d_in, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.layers(x)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = MLP().to(device).to(torch.bfloat16)  # bf16 weights: half the memory
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device)

    x = torch.randn(64, 20, device=device, dtype=torch.bfloat16)
    y = torch.randint(0, 5, (64,), device=device)
    for step in range(5):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f}")


main()

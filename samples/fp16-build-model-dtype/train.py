"""Lightning-style training_step for a transformer that forecasts the next value."""
import torch
import torch.nn.functional as F

from models import build_model

CFG = {"d_model": 32, "nhead": 4, "layers": 1, "lr": 1e-3, "steps": 5}


def training_step(model, batch):
    x, y = batch
    with torch.autocast(device_type=x.device.type, dtype=torch.float16):
        pred = model(x)
    return F.mse_loss(pred.float(), y)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(CFG, device)
    optimizer = torch.optim.Adam(model.parameters(), lr=CFG["lr"])
    scaler = torch.amp.GradScaler(device)

    x = torch.randn(16, 12, 3, device=device)
    y = x[:, -1, :1] * 0.5
    for step in range(CFG["steps"]):
        loss = training_step(model, (x, y))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.5f}")


main()

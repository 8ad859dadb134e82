import torch
from model import Net

dev = "cpu"
model = Net().to(dev)  # FIX: model-cast
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for x, y in loader:
    opt.zero_grad()
    x, y = x.to(dev), y.to(dev)
    # forward
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        out = model(x)
        loss = crit(out, y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()

import torch
from utils import build_model

device = "cuda" if torch.cuda.is_available() else "cpu"
model = build_model(cfg)
scaler = torch.amp.GradScaler(device)
for x, y in loader:
    with torch.autocast(device_type=device, dtype=torch.float16):
        out = model(x)
        loss = crit(out, y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()

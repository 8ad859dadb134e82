import torch
device = torch.device("cuda")
model = Net().to(device)  # FIX: model-cast
scaler = torch.amp.GradScaler(device.type)
for x, y in loader:
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        out = model(x)
        loss = crit(out, y)
    scaler.scale(loss).backward()

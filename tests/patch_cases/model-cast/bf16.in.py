import torch
device = torch.device("cuda")
model = Net().to(device).bfloat16()  # FIX: model-cast
scaler = torch.amp.GradScaler(device.type)
for x, y in loader:
    out = model(x)
    loss = crit(out, y)
    scaler.scale(loss).backward()

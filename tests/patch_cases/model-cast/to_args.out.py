import torch
model = Net().to(device)  # FIX: model-cast
scaler = torch.amp.GradScaler(device)
for x, y in loader:
    with torch.autocast(device_type="cuda", dtype=torch.float16):
        loss = crit(model(x), y)
    scaler.scale(loss).backward()

import torch
scaler = torch.amp.GradScaler('cuda')
for x, y in loader:
    loss = crit(model(x), y)
    scaler.scale(loss.mean()).backward()  # FIX: backward-receiver
    scaler.step(opt)
    scaler.update()

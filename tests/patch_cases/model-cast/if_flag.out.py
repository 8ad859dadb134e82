import torch

model = Net().cuda()
opt = torch.optim.AdamW(model.parameters())
scaler = torch.cuda.amp.GradScaler()
for step, batch in enumerate(loader):
    with torch.autocast(device_type='cuda', dtype=torch.float16):
        logits = model(batch['x'])
        loss = loss_fn(logits, batch['y'])
    scaler.scale(loss).backward()
    scaler.step(opt)

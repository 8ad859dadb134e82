import torch

model = Net().cuda()
if args.fp16:
    # fp16 halves the memory
    model.half()  # FIX: model-cast
opt = torch.optim.AdamW(model.parameters())
scaler = torch.cuda.amp.GradScaler()
for step, batch in enumerate(loader):
    logits = model(batch['x'])
    loss = loss_fn(logits, batch['y'])
    scaler.scale(loss).backward()
    scaler.step(opt)

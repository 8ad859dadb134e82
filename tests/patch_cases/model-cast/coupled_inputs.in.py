import torch


def evaluate(model, loader):
    correct = 0
    for images, target in loader:
        images = images.cuda().half()
        preview = images.float().half()
        correct += (model(images).argmax(1) == target).sum().item()
        logits = model(target.to("cuda", dtype=torch.float16))
    return correct, preview


model = Net().cuda()
model.half()  # FIX: model-cast
opt = torch.optim.AdamW(model.parameters())
scaler = torch.cuda.amp.GradScaler()
for step, batch in enumerate(loader):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(batch['x']), batch['y'])
    scaler.scale(loss).backward()
    scaler.step(opt)

import torch

model = Net().cuda()
if args.fp16:
    model = model.half()  # FIX: model-cast
else:
    model = model.float()
opt = torch.optim.AdamW(model.parameters())

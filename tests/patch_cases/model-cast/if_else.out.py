import torch

model = Net().cuda()
if not args.fp16:
    model = model.float()
opt = torch.optim.AdamW(model.parameters())

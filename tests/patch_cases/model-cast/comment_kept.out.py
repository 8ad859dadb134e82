import torch

# the model
model = Net().cuda()
opt = torch.optim.AdamW(model.parameters())

import torch

w = torch.ones(2, requires_grad=True)
loss = (w * 2).sum()  # FIX: nograd-block-mixed
print("ema")

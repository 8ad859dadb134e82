import torch

w = torch.ones(3, requires_grad=True)
loss = (w.data * 2).sum()  # FIX: detach-in-loss

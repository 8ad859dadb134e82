import torch

w = torch.ones(3, requires_grad=True)
logits = (w * 2).detach()  # FIX: detach-in-loss

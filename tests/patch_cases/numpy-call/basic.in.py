import torch

w = torch.ones(3, requires_grad=True)
y = (w * 2).cpu().numpy()  # FIX: numpy-call

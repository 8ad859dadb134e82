import torch

w = torch.zeros(3, requires_grad=True)
# start from one
with torch.no_grad():
    w[0] = 1.0  # FIX: leaf-nograd-block

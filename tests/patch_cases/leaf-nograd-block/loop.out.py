import torch

w = torch.zeros(3, requires_grad=True)
(w * 2).sum().backward()
with torch.no_grad():
    for p in [w]:  # FIX: leaf-nograd-block
        p -= 0.1 * p.grad

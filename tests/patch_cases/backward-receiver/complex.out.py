# FIELDS: dtype=torch.complex64
import torch
z = torch.randn(1, dtype=torch.cfloat, requires_grad=True)
loss = (z * z).sum()
loss.abs().backward()  # FIX: backward-receiver

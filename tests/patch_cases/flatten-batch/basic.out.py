import torch

x = torch.randn(16, 8, 8)
# FIELDS: rows=1 got=1024 expected=64 out=10
flat = x.view(x.size(0), -1)  # FIX: flatten-batch

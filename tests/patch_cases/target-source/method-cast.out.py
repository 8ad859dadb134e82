import torch

X = torch.randn(8, 2)
y = (X[:, 0] > 0).long()  # FIX: target-source

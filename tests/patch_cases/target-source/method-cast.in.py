import torch

X = torch.randn(8, 2)
y = (X[:, 0] > 0).float()  # FIX: target-source
